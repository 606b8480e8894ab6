package headway

import (
	"context"
	"time"
)

// A key's outage shared with a fleet (see SharedProber): the key holds its
// queue while the fleet reports its host down, sends a probe only when the
// fleet gives it the turn, tells the fleet what its requests found, and
// resumes when the fleet finds the host back.

// fleetRecheck is how long at most a key held by its fleet's outage waits
// before it looks again, in memory, whether the fleet found its host back:
// a probe of another process may end the outage at any time.
const fleetRecheck = 10 * time.Millisecond

// prober returns the shared quota as a SharedProber, if it is one and the
// outage state is on.
func (t *Transport) prober() SharedProber {
	if t.probe.initial <= 0 {
		return nil
	}
	p, _ := t.cfg.shared.(SharedProber)
	return p
}

// fleetGate decides whether departure seq of k may go as far as the fleet's
// outage of key goes: it may (ok) when the fleet reports the host up, or
// when it is k's probe and the fleet gives this process the turn (turn).
// Otherwise k looks again after recheck, and next is when the fleet's next
// probe is due. Asking for the turn is the only call that may make a round
// trip, and only when the fleet's probe is due.
func (t *Transport) fleetGate(ctx context.Context, p SharedProber, key string, k *keyState, seq uint64) (recheck, next time.Duration, ok, turn bool) {
	down, next := p.HostState(key)
	if !k.isProbe(seq) {
		return next, next, !down, false
	}
	if !down {
		// The fleet found the host back: so does k, if it went down with
		// the fleet; otherwise (the fleet never heard of it) this is k's
		// own probe.
		k.fleetUp()
		return 0, 0, true, false
	}
	if next > 0 {
		return next, next, false, false
	}
	w, err := p.ProbeTurn(ctx, key)
	if err != nil || w <= 0 {
		return 0, 0, true, true // this process's turn, or probing on its own
	}
	return w, next, false, false
}

// shareHealth tells the fleet what the answer to departure seq of k found,
// v, when it matters to the fleet: the host went down (the key's outage
// began with it, or the key's probe failed), or came back. wasDown and
// wasProbe are whether k was down, and seq its probe, when it was sent.
func (t *Transport) shareHealth(ctx context.Context, key string, k *keyState, v outageVerdict, wasDown, wasProbe bool) {
	p := t.prober()
	if p == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	switch {
	case v == hostDown && k.isDown() && (wasProbe || !wasDown):
		w, err := p.HostDown(ctx, key, t.probe.initial, t.probe.cap)
		if err == nil {
			k.fleetHold(w, w) // the fleet's schedule, not k's own
		}
	case v == hostUp && wasDown && !k.isDown():
		_ = p.HostUp(ctx, key)
	}
}

// fleetHold keeps k's queue waiting, as in an outage, because its fleet
// reports the host down, its next probe due next from now: k looks again
// after recheck, or after fleetRecheck, whichever comes first. A request
// that cannot wait for the fleet's next probe fails at once. Called
// without k.mu.
func (k *keyState) fleetHold(recheck, next time.Duration) {
	now := k.env.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	o := &k.out
	if !o.down {
		o.downAt = k.sent
		o.setDown(true)
	}
	o.fleet = true
	o.backoff(k.env.probe) // should the fleet go quiet, k probes on its own
	o.next = satAdd(now, int64(min(max(recheck, time.Millisecond), fleetRecheck)))
	o.fleetNext = satAdd(now, int64(next))
	k.failLate(now)
	k.dispatch(now)
}

// fleetUp ends k's outage, if its fleet reported the host down to it: the
// fleet found the host back. Called without k.mu, by k's probe.
func (k *keyState) fleetUp() {
	if !k.out.isDown.Load() {
		return
	}
	now := k.env.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	o := &k.out
	if !o.down || !o.fleet {
		return
	}
	o.probing, o.upAt = false, k.sent
	o.setDown(false)
	k.dispatch(now)
}
