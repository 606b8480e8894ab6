package headway

import "math"

// The pacer is a leaky bucket written as GCRA (the generic cell rate
// algorithm, "virtual scheduling"): each limit keeps a theoretical arrival
// time (TAT), the instant at which its bucket would be empty again. A request
// of n units may leave at
//
//	max(now, TAT + n·T − B·T)
//
// where T is the limit's interval and B its burst, and leaving moves TAT to
// max(TAT, departure) + n·T. Departures are computed from TAT, never from
// summed sleeps, so a long run does not drift.
//
// The pacer is pure: every method takes the time as an argument, in
// nanoseconds since an epoch chosen by the caller. It is not safe for
// concurrent use; its owner locks.

// bucket is one limit's GCRA state.
type bucket struct {
	interval   int64 // T: nanoseconds one unit takes to drain
	burst      int64 // B: units that may leave at once
	tat        int64 // theoretical arrival time
	unweighted bool  // every request spends one unit, whatever its cost
}

// pacer paces one key against all of its limits at once.
type pacer struct {
	buckets    []bucket
	inline     [2]bucket // the buckets of up to two limits, without a pointer to chase
	pauseUntil int64     // nothing leaves before this instant
}

// init sets p up for limits. It keeps a pointer into p: a pacer is not
// copied once set up.
func (p *pacer) init(limits []Limit) {
	if len(limits) <= len(p.inline) {
		p.buckets = p.inline[:len(limits)]
	} else {
		p.buckets = make([]bucket, len(limits))
	}
	for i, l := range limits {
		p.buckets[i] = bucket{interval: int64(l.Interval()), burst: l.burst(), unweighted: l.Unweighted}
	}
}

// units is what n requests costing cost in total spend on b.
func (b *bucket) units(n, cost int64) int64 {
	if b.unweighted {
		return n
	}
	return cost
}

// earliest returns the earliest instant at or after now at which n requests
// costing cost units in total may leave together, given every limit and any
// pause. It does not change the pacer.
func (p *pacer) earliest(now, n, cost int64) int64 {
	d := max(now, p.pauseUntil)
	for i := range p.buckets {
		b := &p.buckets[i]
		d = max(d, satAdd(b.tat, satMul(b.units(n, cost)-b.burst, b.interval)))
	}
	return d
}

// take spends the cost of one request leaving at d, which must be a value
// earliest allowed.
func (p *pacer) take(d, cost int64) {
	for i := range p.buckets {
		b := &p.buckets[i]
		b.tat = satAdd(max(b.tat, d), satMul(b.units(1, cost), b.interval))
	}
}

// giveBack returns the cost of a request that was taken but never sent, as
// far as the buckets are not already full again at now.
func (p *pacer) giveBack(now, cost int64) {
	for i := range p.buckets {
		b := &p.buckets[i]
		b.tat = max(b.tat-satMul(b.units(1, cost), b.interval), now)
	}
}

// pause stops every departure before until. A pause never shortens an
// earlier, longer one.
func (p *pacer) pause(until int64) { p.pauseUntil = max(p.pauseUntil, until) }

// tooBig reports the first limit whose burst is smaller than cost: such a
// request could never leave.
func (p *pacer) tooBig(cost int64) (int, bool) {
	for i := range p.buckets {
		if b := &p.buckets[i]; b.units(1, cost) > b.burst {
			return i, true
		}
	}
	return 0, false
}

// idle reports whether the pacer holds nothing at now: every bucket is full
// and no pause lasts. An idle pacer is the same as a new one.
func (p *pacer) idle(now int64) bool {
	if p.pauseUntil > now {
		return false
	}
	for i := range p.buckets {
		if p.buckets[i].tat > now {
			return false
		}
	}
	return true
}

func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	p := a * b
	if p/b != a {
		if (a < 0) != (b < 0) {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return p
}
