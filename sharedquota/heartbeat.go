package sharedquota

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"
)

// loop announces the process once per heartbeat interval, and at once
// when it first uses a key, and forgets keys left idle, until Close.
func (r *Redis) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		r.beat()
	}
}

// beat runs one round: it forgets the keys left idle and announces the
// process, for every key at once, in one call. While Redis is away, the
// round's call is the retry the interval allows, as a reservation's would
// be: a process whose keys are idle learns that Redis is back as soon as
// the busy ones.
func (r *Redis) beat() {
	idle := r.now() - int64(r.idleAfter())
	r.mu.Lock()
	r.outs.mu.Lock() // a key's outage state goes with it
	for k, ks := range r.keys {
		if ks.lastUsed.Load() < idle {
			delete(r.keys, k)
			delete(r.byHash, ks.hashKey)
			delete(r.outs.m, ks.hashKey)
		}
	}
	r.outs.mu.Unlock()
	r.mu.Unlock()
	if r.usable(nil) != nil {
		return
	}
	ctx := context.Background()
	v, err := r.eval(ctx, heartbeatScript, []string{r.procsKey}, r.beatArgs(false))
	if err == nil {
		var n int64
		if n, err = intReply("heartbeat", v); err == nil && n >= 1 {
			r.up(nil)
			r.seeLive(n)
			if r.uncounted.CompareAndSwap(true, false) {
				r.logInfo("headway/sharedquota: the processes are counted again")
			}
			return
		}
		if err == nil {
			err = &ReplyError{Script: "heartbeat", Reply: v, Reason: "want a positive integer"}
		}
	}
	// Redis answered a key's error or a bad reply (it is up), or failed.
	r.failed(ctx, nil, err)
	if (keyError(err) || errors.Is(err, ErrBadReply)) && r.uncounted.CompareAndSwap(false, true) {
		// The set of processes holds something else: the count stays
		// what it was, and the reservations go on.
		r.logWarn("headway/sharedquota: the processes cannot be counted: the fallback divides by the last count",
			slog.String("err", err.Error()))
	}
}

// seeLive records a count of the live processes. The count kept is the
// largest of the last three, so that an announcement that lapsed for a
// moment does not make the Fallback pace faster.
func (r *Redis) seeLive(n int64) {
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	r.liveNow.Store(n)
	copy(r.liveSeen[1:], r.liveSeen[:len(r.liveSeen)-1])
	r.liveSeen[0] = n
	most := int64(0)
	for _, c := range r.liveSeen {
		most = max(most, c)
	}
	r.live.Store(most)
}

// fallbackShare is the number of processes the Fallback divides a key's
// limits among: the count last seen in Redis, or, if Redis was never seen,
// the count WithFallbackProcesses assumes.
func (r *Redis) fallbackShare() int64 {
	if n := r.live.Load(); n > 0 {
		return n
	}
	return int64(r.cfg.fallbackProcs)
}

func (r *Redis) beatArgs(leave bool) []any {
	ttl := 3 * r.cfg.heartbeat.Milliseconds()
	flag := "0"
	if leave {
		flag = "1"
	}
	return []any{r.cfg.id, strconv.FormatInt(max(ttl, 1), 10), flag}
}

// idleAfter is how long a key stays known without a reservation.
func (r *Redis) idleAfter() time.Duration { return max(10*r.cfg.heartbeat, time.Minute) }
