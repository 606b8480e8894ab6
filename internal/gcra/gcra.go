// Package gcra is the one leaky bucket of headway: the generic cell rate
// algorithm in its "virtual scheduling" form. The Transport's pacer and
// sharedquota's local fallback run it in Go; sharedquota's Lua scripts run
// the same rule in Redis, and a test in sharedquota holds the two to the
// same decisions.
//
// Each limit is a Bucket that keeps a theoretical arrival time (TAT), the
// instant at which it would be empty again. A request of u units may leave
// at
//
//	max(from, TAT + u·T − B·T)
//
// where T is the limit's interval and B its burst, and leaving at d moves
// TAT to max(TAT, d) + u·T. Departures are computed from TAT, never from
// summed sleeps, so a long run does not drift.
//
// The package is pure: time is an argument, an int64 in a unit and from an
// epoch the caller chooses (nanoseconds of a monotonic clock in the pacer,
// microseconds of Redis's clock in the shared quota), and the arithmetic
// saturates instead of overflowing. Nothing here is safe for concurrent
// use; the owner of the state locks.
package gcra

import (
	"math"
	"math/bits"
)

// A Bucket is one limit's parameters and state.
type Bucket struct {
	Interval   int64 // T: the time one unit takes to drain
	Burst      int64 // B: the units that may leave at once; at least 1
	TAT        int64 // the theoretical arrival time
	Unweighted bool  // every request spends one unit, whatever its cost
}

// Units returns what n requests costing cost units in total spend of b.
func (b *Bucket) Units(n, cost int64) int64 {
	if b.Unweighted {
		return n
	}
	return cost
}

// Earliest returns the earliest instant at or after from at which n
// requests costing cost units in total may leave b together.
func (b *Bucket) Earliest(from, n, cost int64) int64 {
	return Buckets{*b}.Earliest(from, n, cost)
}

// Take spends one request of cost units leaving at d, a value Earliest
// allowed.
func (b *Bucket) Take(d, cost int64) {
	bs := Buckets{*b}
	bs.Take(d, cost)
	*b = bs[0]
}

// Buckets are the limits a request must pass at once.
type Buckets []Bucket

// Earliest returns the earliest instant at or after from at which n
// requests costing cost units in total may leave together under every
// limit. It changes nothing.
func (bs Buckets) Earliest(from, n, cost int64) int64 {
	for i := range bs {
		b := &bs[i]
		from = max(from, SatAdd(b.TAT, SatMul(b.Units(n, cost)-b.Burst, b.Interval)))
	}
	return from
}

// Take spends one request of cost units leaving at d, a value Earliest
// allowed, on every limit.
func (bs Buckets) Take(d, cost int64) {
	for i := range bs {
		b := &bs[i]
		b.TAT = SatAdd(max(b.TAT, d), SatMul(b.Units(1, cost), b.Interval))
	}
}

// TakeNow takes one request of cost at now if every bucket lets it leave
// then, and reports whether it did: what Earliest(now, 1, cost) <= now,
// then Take(now, cost), do, with their rules written out: a call fewer on
// a pacer's fast path (the rules do not inline).
func (bs Buckets) TakeNow(now, cost int64) bool {
	if len(bs) == 1 {
		// One limit, the usual: no loops, and no product for a request
		// that spends one unit.
		b := &bs[0]
		u := b.Units(1, cost)
		if SatAdd(b.TAT, SatMul(u-b.Burst, b.Interval)) > now {
			return false
		}
		step := b.Interval
		if u != 1 {
			step = SatMul(u, b.Interval)
		}
		b.TAT = SatAdd(max(b.TAT, now), step)
		return true
	}
	for i := range bs {
		b := &bs[i]
		if SatAdd(b.TAT, SatMul(b.Units(1, cost)-b.Burst, b.Interval)) > now { // Earliest's
			return false
		}
	}
	for i := range bs {
		b := &bs[i]
		b.TAT = SatAdd(max(b.TAT, now), SatMul(b.Units(1, cost), b.Interval)) // Take's
	}
	return true
}

// GiveBack returns the cost of a request that was taken but never sent, as
// far as the buckets are not already empty again at now.
func (bs Buckets) GiveBack(now, cost int64) {
	for i := range bs {
		b := &bs[i]
		b.TAT = max(b.TAT-SatMul(b.Units(1, cost), b.Interval), now)
	}
}

// TooBig reports the first limit whose burst is smaller than what a request
// of cost units spends: such a request could never leave.
func (bs Buckets) TooBig(cost int64) (int, bool) {
	for i := range bs {
		if b := &bs[i]; b.Units(1, cost) > b.Burst {
			return i, true
		}
	}
	return 0, false
}

// Idle reports whether every bucket is empty at now: the state is the same
// as a new one's.
func (bs Buckets) Idle(now int64) bool {
	for i := range bs {
		if bs[i].TAT > now {
			return false
		}
	}
	return true
}

// SatAdd returns a+b, or the int64 bound it overflows.
func SatAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// SatMul returns a·b, or the int64 bound it overflows. The product of the
// magnitudes is taken in 128 bits: no division, which costs more than the
// rest of a request's pacing.
func SatMul(a, b int64) int64 {
	ua, ub := uint64(a), uint64(b)
	if a < 0 {
		ua = -ua // MinInt64's magnitude, 1<<63, too
	}
	if b < 0 {
		ub = -ub
	}
	hi, lo := bits.Mul64(ua, ub)
	if (a < 0) != (b < 0) {
		if hi != 0 || lo > 1<<63 {
			return math.MinInt64
		}
		return int64(-lo)
	}
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}
