package sharedquota

import (
	"context"
	"slices"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/ratelimitheader"
)

// learnedPolicy is the policy this process last shared for a key, when,
// and for how long Redis holds it.
type learnedPolicy struct {
	iv, burst int64 // µs, requests
	at, life  int64 // monotonic ns, ns
}

// The policies shared are those the scripts accept back: at most a
// billion requests, per two days at most (one request a day at the
// slowest). A longer policy stays with the process that read it.
const (
	maxPolicyLimit  = 1_000_000_000
	maxPolicyPeriod = 48 * time.Hour
)

// policyLife is how long a shared policy holds without being stated again:
// two of its periods, a minute at least.
func policyLife(period time.Duration) time.Duration { return max(2*period, time.Minute) }

// Learn shares with every process what a response on key said about its
// quota. It implements headway.SharedLearner.
//
//   - A policy (sig.Limit requests per sig.Period) becomes a shared limit
//     of one request every Period/Limit that Reserve applies in every
//     process to the key when it is called without limits: the key of a
//     Transport with no limit configured. Its burst is what the server
//     holds, one request kept in reserve (as a Transport keeps one of a
//     configured burst): Limit, or less when the responses say less was
//     ever left (a bucket of 10 stating 20 per second, say), the most any
//     process has seen. A policy that starts spends what the server says
//     is left, not a fresh burst. It holds for two periods (a minute at
//     least) after it was last stated.
//   - A bare throttle (sig.Throttled, with no quota and no policy stated)
//     cuts the pace of the key's reservations without limits in every
//     process at once, and the pace climbs back along one curve for all of
//     them: the AIMD of a Transport without limits (a multiplicative cut,
//     then a cubic climb; slow start after the first cut), kept in Redis
//     and counted over the whole fleet's reservations, so that the fleet
//     learns once, not once per process. A throttle of a request that was
//     reserved before the last cut changes nothing. While Redis is away
//     the fallback paces such a key at the last pace it read, divided
//     among the processes; Learn then returns the error, and the Transport
//     cuts its own pace as it would without a shared quota.
//   - An exhausted quota (Remaining 0) whose wait derives from its reset,
//     when no policy states the rate at which it refills, becomes a shared
//     pause of sig.Wait, as Pause makes it. A quota whose policy is stated
//     is left to the policy and to each process's model of the server.
//
// Learn makes a round trip only to share something new: a bare throttle, a policy that
// changed or that was last shared more than half its life ago, a pause
// that ends later than the one this process knows of (by more than an
// eighth of it). Otherwise it returns nil at once.
func (r *Redis) Learn(ctx context.Context, key string, sig ratelimitheader.Signal) error {
	if r.closed.Load() {
		return ErrClosed
	}
	switch {
	case sig.Limit > 0 && sig.Period > 0 && !sig.OverMaxServerWait && sig.Limit <= maxPolicyLimit && sig.Period <= maxPolicyPeriod:
		left := int64(-1)
		if sig.HasRemaining && !sig.Throttled {
			left = sig.Remaining
		}
		return r.learnPolicy(ctx, r.state(key), sig.Limit, sig.Period, left)
	case sig.Throttled && !sig.HasRemaining && !sig.Permanent:
		var named time.Duration
		if sig.HasWait {
			named = sig.Wait
		}
		return r.learnThrottle(ctx, r.state(key), named)
	case sig.HasRemaining && sig.Remaining == 0 && sig.HasWait && !sig.RetryAfter && sig.Wait > 0:
		ks := r.state(key)
		if ks.pausedFor(r.now()) >= sig.Wait-sig.Wait/8 {
			return nil // known here, and so shared already
		}
		return r.Pause(ctx, key, sig.Wait)
	}
	return nil
}

// learnPolicy shares the policy of limit requests per period for ks; left
// is what the response said was left, -1 if it did not say.
func (r *Redis) learnPolicy(ctx context.Context, ks *keyState, limit int64, period time.Duration, left int64) error {
	iv := max((int64(period)/limit+999)/1000, 1) // µs, rounded up
	life := policyLife(period)
	now := r.now()
	if left >= 0 && left+1 > ks.capSeen.Load() {
		ks.capSeen.Store(left + 1) // one writer at a time matters not: only ever raised to what was seen
	}
	burst := limit
	if c := ks.capSeen.Load(); c > 0 {
		burst = min(burst, c)
	}
	burst = max(burst-1, 1) // one in reserve
	if p := ks.learned.Load(); p != nil && p.iv == iv && p.burst == burst && now-p.at < int64(life/2) {
		return nil
	}
	if err := r.usable(ks); err != nil {
		return err
	}
	if ks.learned.Load() == nil {
		// The first policy this process shares: the requests the answer
		// let go wait for it (see Reserve), not to leave unpaced.
		done := make(chan struct{})
		if ks.firstLearn.CompareAndSwap(nil, &done) {
			defer func() {
				close(done)
				ks.firstLearn.CompareAndSwap(&done, nil)
			}()
		}
	}
	// The processes that may each have a request in flight, not yet
	// counted in what the server said was left: those counted, but no
	// fewer than are assumed uncounted, since the count lags at the start.
	procs := max(r.live.Load(), int64(r.cfg.fallbackProcs))
	args := []any{iv, burst, int64(life / time.Microsecond), r.marginMs() * 1000, r.capUs(), left, procs, r.cfg.id}
	v, err := r.eval(ctx, learnScript, ks.keys, args)
	if err == nil {
		if _, err = intReply("learn", v); err == nil {
			r.up(ks)
			ks.learned.Store(&learnedPolicy{iv: iv, burst: burst, at: now, life: int64(life)})
			return nil
		}
	}
	if r.failed(ctx, ks, err) {
		return ctx.Err()
	}
	return err
}

// The fleet's AIMD (see cutScript and aimdLua, which hold the same values):
// the share of the rate kept after a cut, the time the cubic takes to
// climb back, the slowest pace (thousandths of a request per second), the
// fastest, how long a cut is remembered, how long throttles in a row (or
// a wait named) last at least to be taken for a block, and how many times
// what a block cost the climb back after it takes at least: the root's
// blockLeast and penClimb.
const (
	aimdBeta       = 0.9
	aimdK          = 12 * time.Second
	aimdFloorMilli = 500
	aimdMostMilli  = 1_000_000_000_000
	aimdLife       = 10 * time.Minute
	aimdBlockLeast = 5 * time.Second
	aimdPenClimb   = 4
)

// learnThrottle applies a bare throttle on ks, which named the wait named
// (0: none), to the fleet's pace (see cutScript).
func (r *Redis) learnThrottle(ctx context.Context, ks *keyState, named time.Duration) error {
	if err := r.usable(ks); err != nil {
		return err
	}
	// The process holds its own reservations without limits until Redis
	// has taken the throttle in (see Reserve): those of its first burst
	// that reserved while the throttle was on its way went into the
	// block it began.
	done := make(chan struct{})
	if ks.cutting.CompareAndSwap(nil, &done) {
		defer func() {
			close(done)
			ks.cutting.CompareAndSwap(&done, nil)
		}()
	}
	v, err := r.eval(ctx, cutScript, ks.keys, []any{ks.departedSeq(r.now()), r.marginMs(), r.capUs(), r.channel, max(r.live.Load(), 1),
		min(max(int64(named/time.Microsecond), 0), r.capUs())})
	if err == nil {
		var rate, cutSeq int64
		if rate, _, cutSeq, err = cutReply(v); err == nil {
			r.up(ks)
			ks.mu.Lock()
			ks.pace = max(ks.pace, (1_000_000_000+rate-1)/rate)
			ks.mu.Unlock()
			ks.heardCut(r.now(), cutSeq)
			return nil
		}
	}
	if r.failed(ctx, ks, err) {
		return ctx.Err()
	}
	return err
}

// sawPace notes the slowest pace, in µs (0: none), that Redis applied at
// now to a reservation of ks without limits, for the fallback. None while
// the policy this process shared still holds (it holds for its life from
// when it was shared; half of it, to leave the clocks room) means that
// Redis forgot it (FLUSHALL, a restart the client's retries hide): the
// next Learn shares it again, as the first. The caller locks ks.
func (ks *keyState) sawPace(now, pace int64) {
	ks.pace = pace
	if p := ks.learned.Load(); pace == 0 && p != nil && now-p.at < p.life/2 {
		ks.learned.CompareAndSwap(p, nil)
	}
}

// depRecord is a reservation without limits of this process: its count in
// the fleet ("an"), when it leaves (monotonic ns), and whether it was
// told to reserve again (see recut).
type depRecord struct {
	seq, at int64
	redone  bool
}

// depRing is how many of them a key remembers: more than a process has in
// flight at once on one key, as a rule.
const depRing = 32

// noteDeps records the reservations of one reply without limits, whose
// departures are at (monotonic ns, in order) and the last of which has
// the count seq. The caller locks ks.
func (ks *keyState) noteDeps(seq int64, at []int64) {
	for i, a := range at {
		s := seq - int64(len(at)-1-i)
		if s <= 0 {
			continue
		}
		ks.deps[ks.depNext%depRing] = depRecord{seq: s, at: a}
		ks.depNext++
	}
}

// departedSeq returns the highest count among this process's reservations
// without limits on ks that have left by now: a throttled request was one
// of those, so its count is no higher. With none known, any count.
func (ks *keyState) departedSeq(now int64) int64 {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	best := int64(-1)
	for _, d := range ks.deps {
		if d.seq > best && d.at <= now {
			best = d.seq
		}
	}
	if best < 0 {
		return 1e15
	}
	return best
}

// paceLimits returns the limits the fallback applies to a reservation
// without limits on ks: the slowest pace Redis applied last, one request
// at a time; none if it applied none. The caller locks ks.
func (ks *keyState) paceLimits() []headway.Limit {
	if ks.pace <= 0 {
		return nil
	}
	return []headway.Limit{{Count: 1, Period: time.Duration(ks.pace) * time.Microsecond}}
}

// heardCut notes a cut of the fleet's pace, made when the count was
// cutSeq, heard of at now: the leased slots, spent at the old pace, go,
// and the requests booked at it reserve again before they leave (see
// recut).
func (ks *keyState) heardCut(now, cutSeq int64) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if cutSeq <= ks.cutSeq {
		return
	}
	ks.cutSeq, ks.cutAt = cutSeq, now
	ks.slots = ks.slots[:0]
}

// recutSpan is how far from its departure a request asks whether it must
// reserve again: the timer that wakes it is late by a little, never early.
const recutSpan = 20 * time.Millisecond

// recut reports whether the request of this process that leaves about now
// was booked at a pace the fleet has cut since: a reservation counted no
// later than the cut, due to leave after this process heard of it. It is
// told so once; it then reserves again, in the schedule at the new pace.
func (ks *keyState) recut(now int64) bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.cutSeq == 0 {
		return false
	}
	best := -1
	for i, d := range ks.deps {
		if d.seq == 0 || d.redone || d.seq > ks.cutSeq || d.at <= ks.cutAt || d.at > now+int64(time.Millisecond) || d.at < now-int64(recutSpan) {
			continue
		}
		if best < 0 || d.at < ks.deps[best].at {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	ks.deps[best].redone = true
	return true
}

// noteHeld records a reservation held for the fleet's probe, due to ask
// again at at (monotonic ns). The caller locks ks.
func (ks *keyState) noteHeld(at int64) {
	if len(ks.held) >= depRing {
		ks.held = ks.held[1:]
	}
	ks.held = append(ks.held, at)
}

// unhold reports whether a reservation held for the fleet's probe is due
// about now: its request reserves again, once.
func (ks *keyState) unhold(now int64) bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for i, at := range ks.held {
		if at <= now+int64(time.Millisecond) && at >= now-int64(recutSpan) {
			ks.held = append(ks.held[:i], ks.held[i+1:]...)
			return true
		}
	}
	// Those long past were never asked about (a wait too short to check).
	ks.held = slices.DeleteFunc(ks.held, func(at int64) bool { return at < now-int64(recutSpan) })
	return false
}
