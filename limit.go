package headway

import (
	"fmt"
	"math"
	"time"
)

// A Limit is a rate limit: at most Count units per Period, in bursts of at
// most Burst units.
//
// A request spends its cost (one unit unless set with [WithCost] or
// [WithCostFunc]) on every limit of its key, unless the limit counts
// requests ([Limit.Requests]), in which case every request spends one unit.
//
// The zero Limit is invalid; build one with [Per] (Per(600, time.Minute)),
// [PerSecond] or [Every].
type Limit struct {
	// Count is the number of units allowed per Period. It must be positive.
	Count int
	// Period is the length of the window Count applies to. It must be positive.
	Period time.Duration
	// Burst is the number of units that may leave at once after an idle
	// spell. Zero means 1: requests leave evenly spaced, Period/Count apart.
	Burst int
	// Unweighted makes the limit count requests rather than cost: every
	// request spends one unit of it. See [Limit.Requests].
	Unweighted bool
}

// Per returns a Limit of n units per period d, with a burst of 1.
func Per(n int, d time.Duration) Limit { return Limit{Count: n, Period: d} }

// Every returns a Limit of one unit every d.
func Every(d time.Duration) Limit { return Per(1, d) }

// PerSecond returns a Limit of n units per second.
func PerSecond(n int) Limit { return Per(n, time.Second) }

// WithBurst returns a copy of l that lets up to b units leave at once.
func (l Limit) WithBurst(b int) Limit {
	l.Burst = b
	return l
}

// Requests returns a copy of l that counts every request as one unit,
// whatever its cost: the requests-per-minute limit that sits beside a
// tokens-per-minute limit, for example.
func (l Limit) Requests() Limit {
	l.Unweighted = true
	return l
}

// Interval returns the time one unit takes to drain: Period/Count, rounded
// up to the nanosecond so that pacing never runs faster than the limit.
func (l Limit) Interval() time.Duration {
	if l.Count <= 0 || l.Period <= 0 {
		return 0
	}
	// Rounded up without overflow: Period+Count-1 may not fit.
	n := time.Duration(l.Count)
	iv := l.Period / n
	if l.Period%n != 0 {
		iv++
	}
	return iv
}

func (l Limit) burst() int64 {
	if l.Burst <= 0 {
		return 1
	}
	return int64(l.Burst)
}

// String returns a short form such as "50/1s burst 10".
func (l Limit) String() string {
	s := fmt.Sprintf("%d/%v", l.Count, l.Period)
	if l.Burst > 1 {
		s += fmt.Sprintf(" burst %d", l.Burst)
	}
	if l.Unweighted {
		s += " requests"
	}
	return s
}

// maxSpan bounds the time a burst may span, so that the pacer's arithmetic
// on nanoseconds can never overflow.
const maxSpan = 100 * 365 * 24 * time.Hour

func (l Limit) validate() error {
	switch {
	case l.Count <= 0:
		return fmt.Errorf("headway: invalid limit %v: Count must be positive", l)
	case l.Period <= 0:
		return fmt.Errorf("headway: invalid limit %v: Period must be positive", l)
	case l.Burst < 0:
		return fmt.Errorf("headway: invalid limit %v: Burst must not be negative", l)
	case l.Interval() <= 0:
		return fmt.Errorf("headway: invalid limit %v: Count per Period is finer than a nanosecond", l)
	case l.burst() > math.MaxInt64/int64(l.Interval()) || time.Duration(l.burst())*l.Interval() > maxSpan:
		return fmt.Errorf("headway: invalid limit %v: Burst spans more than %v", l, maxSpan)
	}
	return nil
}
