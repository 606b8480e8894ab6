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
func (t *Transport) prober() SharedProber { return t.fleet }

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
// began with it, or the key's probe failed), or came back (the answer
// ended k's outage, or answered a stall k told the fleet of). wasDown and
// wasProbe are whether k was down, and seq its probe, when it was sent;
// downBefore whether k was down when the answer came.
func (t *Transport) shareHealth(ctx context.Context, key string, k *keyState, v outageVerdict, wasDown, wasProbe, downBefore bool) {
	p := t.prober()
	if p == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	t.tellVerdict(ctx, key, k)
	switch {
	case v == hostDown && k.isDown() && (wasProbe || !wasDown):
		k.out.stallShared.Store(false) // the outage's own reports take over
		w, err := p.HostDown(ctx, key, t.probe.initial, t.probe.cap)
		if err == nil {
			k.fleetHold(w, w) // the fleet's schedule, not k's own
		}
	case v != hostUp:
	case downBefore && !k.isDown():
		_ = p.HostUp(ctx, key) // the answer ended k's outage
	case k.out.stallShared.Load() && k.out.stallShared.CompareAndSwap(true, false):
		// An answer ends the stall k told the fleet of: the host answers.
		// k may be held by the fleet's outage meanwhile (its own report
		// made it one), which ends too; an outage of its own (a failure
		// since) would have taken stallShared back. Told once the report
		// returned (see fleetStall): sent beside it, the end could reach
		// the fleet first.
		k.out.stall.told <- struct{}{}
		_ = p.HostUp(ctx, key)
		<-k.out.stall.told
		k.fleetUp()
	}
}

// heardLimit reports whether k's fleet takes its overloads for a limit's
// refusals (see SharedVerdict): asked, from memory, as one is answered.
func (t *Transport) heardLimit(k *keyState) bool {
	return t.verdict != nil && k.out.stall != nil && t.verdict.HeardLimit(k.out.stall.key) > 0
}

// What a key tells its fleet of its overloads (see fleetStall.tell).
const (
	tellLimit   = 1 // its trial passed: a limit's
	tellNoLimit = 2 // they came too often for a limit's
)

// tellVerdict tells k's fleet what k found its overloads to be, if it
// found something since it last told (see overloadLimit).
func (t *Transport) tellVerdict(ctx context.Context, key string, k *keyState) {
	st := k.out.stall
	if t.verdict == nil || st == nil || st.tell.Load() == 0 {
		return
	}
	switch st.tell.Swap(0) {
	case tellLimit:
		_ = t.verdict.TellLimit(ctx, key, overloadSpan)
	case tellNoLimit:
		_ = t.verdict.TellLimit(ctx, key, 0)
	}
}

// onStall runs, on k's stall timer, when a silence of k (on key) that
// began may have become a stall (see sending): if it has, and the fleet
// has not heard of it, the fleet hears of it now, as of a failure, with
// the fleet's first probe due when k's stall ends at the latest (see
// outageGate): the first failure of a stalled request (a timeout) brings
// it forward, and an answer to one ends the fleet's outage. Each process
// of the fleet holds its queue as soon as it hears: it need not see its
// own requests stall.
func (t *Transport) onStall(key string, k *keyState) {
	now := t.now()
	mark, end, ok := k.stalls(now)
	if !ok || k.isDown() {
		return
	}
	k.mu.Lock()
	fresh := k.out.stall.first != mark
	k.out.stall.first = mark
	k.mu.Unlock()
	if !fresh {
		return
	}
	told := k.out.stall.told
	told <- struct{}{}
	defer func() { <-told }()
	if k.silence() != mark {
		return // answered while an earlier report was told
	}
	k.out.stallShared.Store(true)
	ctx := context.Background()
	if _, err := t.fleet.HostDown(ctx, key, time.Duration(end-now), t.probe.cap); err != nil {
		k.out.stallShared.Store(false)
		return
	}
	if k.silence() != mark && !k.isDown() && k.out.stallShared.Swap(false) {
		_ = t.fleet.HostUp(ctx, key) // answered while the fleet heard
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
		if r := o.rare; r != nil {
			// What k's own requests meet during the fleet's outage
			// tells whether it is a flood k met (see settleLocked).
			r.fine, r.failed = 0, 0
			r.over.held, r.over.downAt = r.over.counting(), now
		}
	}
	o.fleet = true
	o.backoff(k.env.probe) // should the fleet go quiet, k probes on its own
	o.next = satAdd(now, int64(min(max(recheck, time.Millisecond), fleetRecheck)))
	o.fleetNext = satAdd(now, int64(next))
	k.failLate(now)
	k.dispatch(now)
}

// fleetUp ends k's outage, if its fleet reported the host down to it: the
// fleet found the host back. It ends as an outage of k's own does (see
// outageEnded): a brief flood of overloads that k's requests met counts
// towards the rule of overloads, and its queue leaves at a ramp from the
// second. Ended here without, in every process but the one whose probe
// found the host back, the floods of a fleet of 3 processes against a
// server that answers them with 503s were never counted: each process's
// queue went at once when each ended, and 3 processes x 4 workers met
// 198-222 503s for 300 requests (one process of 12 workers: 25). Called
// without k.mu, by k's probe.
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
	o.probing, o.replaying, o.upAt = false, false, k.sent
	o.setDown(false)
	k.outageEnded(now)
	k.dispatch(now)
}
