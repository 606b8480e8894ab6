package sharedquota

import (
	"context"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
)

// learnedPolicy is the policy this process last shared for a key, and when.
type learnedPolicy struct {
	iv, burst int64 // µs, requests
	at        int64 // monotonic ns
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
//   - An exhausted quota (Remaining 0) whose wait derives from its reset,
//     when no policy states the rate at which it refills, becomes a shared
//     pause of sig.Wait, as Pause makes it. A quota whose policy is stated
//     is left to the policy and to each process's model of the server.
//
// Learn makes a round trip only to share something new: a policy that
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
	args := []any{iv, burst, int64(life / time.Microsecond), r.marginMs() * 1000, r.capUs(), left, procs}
	v, err := r.eval(ctx, learnScript, ks.keys, args)
	if err == nil {
		if _, err = intReply("learn", v); err == nil {
			r.up(ks)
			ks.learned.Store(&learnedPolicy{iv: iv, burst: burst, at: now})
			return nil
		}
	}
	if r.failed(ctx, ks, err) {
		return ctx.Err()
	}
	return err
}
