package sharedquota

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// pauseSub is a quota's subscription to the pauses every process
// publishes (see pauseScript). While it is unbroken, a process knows of a
// pause as soon as it is set, and PausedFor needs no round trip: at 500
// requests a second with leases, its checks used to cost Redis more than
// the reservations.
type pauseSub struct {
	ps     *redis.PubSub
	ctx    context.Context // ends at Close: a dial under way gives up
	cancel context.CancelFunc
	done   chan struct{}
	// since is when the subscription was last confirmed, with nothing
	// broken since (monotonic ns); 0 while it is broken. A pause published
	// before it may have been missed.
	since atomic.Int64
}

// subscribe starts listening to the pauses published through c, in the
// background: NewRedis does not wait for Redis. Not through a Ring: a Ring
// subscribes on one shard, and a pause is published on the shard of its
// key, so most would be missed; PausedFor asks Redis instead.
func (r *Redis) subscribe(c redis.UniversalClient) {
	r.sub.done = make(chan struct{})
	if _, ring := c.(*redis.Ring); ring {
		close(r.sub.done)
		return
	}
	r.sub.ctx, r.sub.cancel = context.WithCancel(context.Background())
	r.sub.ps = c.Subscribe(r.sub.ctx) // no channel yet: no round trip
	go r.listen()
}

// listen receives the pauses published until Close. go-redis reconnects
// and subscribes again after an error; a quiet connection is pinged, so
// that a dead one is noticed within two heartbeats.
func (r *Redis) listen() {
	defer close(r.sub.done)
	ctx := r.sub.ctx
	retry := time.NewTimer(0)
	<-retry.C
	defer retry.Stop()
	subscribed := false
	for {
		// Every call has a deadline: go-redis dials (after an error, to
		// reconnect) under the lock Close needs, so that a dial into a
		// Redis that does not answer would hold Close up for the client's
		// dial timeout. (A client without ContextTimeoutEnabled still
		// takes its own timeouts.)
		var msg any
		err := ctx.Err()
		if err == nil && !subscribed {
			sctx, cancel := context.WithTimeout(ctx, 4*r.cfg.timeout)
			err = r.sub.ps.Subscribe(sctx, r.channel)
			cancel()
			if err == nil {
				subscribed = true // go-redis subscribes again after a reconnection
				continue
			}
		} else if err == nil {
			wait := min(2*r.cfg.heartbeat, 2*time.Second)
			rctx, cancel := context.WithTimeout(ctx, wait+4*r.cfg.timeout)
			msg, err = r.sub.ps.ReceiveTimeout(rctx, wait)
			cancel()
		}
		if r.closed.Load() || ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if subscribed && errors.As(err, &ne) && ne.Timeout() && r.ping(ctx) == nil {
				continue // quiet, not broken: the pong comes next
			}
			r.sub.since.Store(0)
			retry.Reset(r.cfg.retry)
			select {
			case <-r.stop:
				return
			case <-retry.C:
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				r.sub.since.Store(max(r.now(), 1))
			}
		case *redis.Message:
			r.heard(m.Payload)
		}
	}
}

// ping asks the subscription's connection for a pong, within the bound of
// a subscription: go-redis dials a new connection, if it needs one, under
// the lock Close takes, and with no deadline a Redis that accepts but does
// not answer would hold Close up for the client's read timeout (issue 10:
// TestBlackholeFromTheStart took 7s, Close 2-3s a process, when the
// subscription timed out before the process closed).
func (r *Redis) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 4*r.cfg.timeout)
	defer cancel()
	return r.sub.ps.Ping(ctx)
}

// heard applies a published pause: "<hash name> <µs left>", for a key this
// process uses.
func (r *Redis) heard(payload string) {
	if r.heardOutage(payload) || r.heardCut(payload) || r.heardVerdict(payload) {
		return
	}
	i := strings.LastIndexByte(payload, ' ')
	if i < 0 {
		return
	}
	left, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil || left < 0 || left > r.capUs() {
		return // not one a process publishes
	}
	r.mu.Lock()
	ks := r.byHash[payload[:i]]
	r.mu.Unlock()
	if ks == nil {
		return
	}
	now := r.now()
	ks.mu.Lock()
	ks.pauseUntil = max(ks.pauseUntil, now+left*1000)
	ks.slots = ks.slots[:0] // leased slots are not worth keeping past a pause
	ks.mu.Unlock()
}

// subscribed reports whether every pause published since checked (when
// the key's pause was last read from Redis) has reached this process.
func (r *Redis) subscribed(checked int64) bool {
	since := r.sub.since.Load()
	return since != 0 && since <= checked
}

// unsubscribe ends the subscription and waits for listen to return.
func (r *Redis) unsubscribe() {
	if r.sub.ps != nil {
		r.sub.cancel()
		_ = r.sub.ps.Close()
	}
	<-r.sub.done
}

// heardCut applies a published cut of the fleet's pace: "c <hash name>
// <count at the cut>" (see cutScript). It reports whether payload was one.
func (r *Redis) heardCut(payload string) bool {
	rest, ok := strings.CutPrefix(payload, "c ")
	if !ok {
		return false
	}
	name, n, ok := strings.Cut(rest, " ")
	if !ok {
		return true
	}
	seq, err := strconv.ParseInt(n, 10, 64)
	if err != nil || seq < 0 || seq > 2e15 {
		return true // not one a process publishes
	}
	r.mu.Lock()
	ks := r.byHash[name]
	r.mu.Unlock()
	if ks != nil {
		ks.heardCut(r.now(), seq)
	}
	return true
}
