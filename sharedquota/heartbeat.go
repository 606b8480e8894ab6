package sharedquota

import (
	"context"
	"strconv"
	"time"
)

// loop announces the process for every key used recently, once per
// heartbeat interval and at once for a new key, and forgets keys left idle,
// until Close.
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

// beat runs one round of announcements.
func (r *Redis) beat() {
	idle := r.now() - int64(r.idleAfter())
	var live, gone []*keyState
	r.mu.Lock()
	for k, ks := range r.keys {
		if ks.lastUsed.Load() < idle {
			delete(r.keys, k)
			gone = append(gone, ks)
		} else {
			live = append(live, ks)
		}
	}
	r.mu.Unlock()
	if r.health.isDown() {
		return // the reservations probe Redis; announcements wait for them
	}
	for _, ks := range gone {
		select {
		case <-r.stop:
			return
		default:
		}
		_, _ = r.eval(context.Background(), heartbeatScript, []string{ks.procsKey}, r.beatArgs(true))
	}
	for _, ks := range live {
		select {
		case <-r.stop:
			return
		default:
		}
		v, err := r.eval(context.Background(), heartbeatScript, []string{ks.procsKey}, r.beatArgs(false))
		if err != nil {
			return // Redis is away; the next round tries again
		}
		if n, err := intReply("heartbeat", v); err == nil {
			ks.live.Store(n)
		}
	}
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
