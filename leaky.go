package headway

import "github.com/headway-go/headway/internal/gcra"

// The pacer is a leaky bucket per limit, written as GCRA (see package
// internal/gcra, which holds the rule): a request leaves at the earliest
// instant every limit and any pause allow.
//
// The pacer is pure: every method takes the time as an argument, in
// nanoseconds since an epoch chosen by the caller. It is not safe for
// concurrent use; its owner locks.

// bucket is one limit's GCRA state.
type bucket = gcra.Bucket

// pacer paces one key against all of its limits at once.
type pacer struct {
	buckets    gcra.Buckets
	inline     [2]bucket // the buckets of up to two limits, without a pointer to chase
	pauseUntil int64     // nothing leaves before this instant
}

// init sets p up for limits. It keeps a pointer into p: a pacer is not
// copied once set up.
func (p *pacer) init(limits []Limit) {
	if len(limits) <= len(p.inline) {
		p.buckets = p.inline[:len(limits)]
	} else {
		p.buckets = make(gcra.Buckets, len(limits))
	}
	for i, l := range limits {
		p.buckets[i] = bucket{Interval: int64(l.Interval()), Burst: l.burst(), Unweighted: l.Unweighted}
	}
}

// earliest returns the earliest instant at or after now at which n requests
// costing cost units in total may leave together, given every limit and any
// pause. It does not change the pacer.
func (p *pacer) earliest(now, n, cost int64) int64 {
	return p.buckets.Earliest(max(now, p.pauseUntil), n, cost)
}

// take spends the cost of one request leaving at d, which must be a value
// earliest allowed.
func (p *pacer) take(d, cost int64) { p.buckets.Take(d, cost) }

// giveBack returns the cost of a request that was taken but never sent, as
// far as the buckets are not already full again at now.
func (p *pacer) giveBack(now, cost int64) { p.buckets.GiveBack(now, cost) }

// pause stops every departure before until. A pause never shortens an
// earlier, longer one.
func (p *pacer) pause(until int64) { p.pauseUntil = max(p.pauseUntil, until) }

// tooBig reports the first limit whose burst is smaller than cost: such a
// request could never leave.
func (p *pacer) tooBig(cost int64) (int, bool) { return p.buckets.TooBig(cost) }

// idle reports whether the pacer holds nothing at now: every bucket is full
// and no pause lasts. An idle pacer is the same as a new one.
func (p *pacer) idle(now int64) bool { return p.pauseUntil <= now && p.buckets.Idle(now) }

func satAdd(a, b int64) int64 { return gcra.SatAdd(a, b) }

func satMul(a, b int64) int64 { return gcra.SatMul(a, b) }
