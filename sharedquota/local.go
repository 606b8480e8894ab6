package sharedquota

import (
	"github.com/headway-go/headway"
)

// localPacer is the GCRA pacer of one key in this process alone, used while
// Redis is away: the same algorithm as the shared one, at the key's limits
// divided among the live processes. Time is in nanoseconds of the quota's
// monotonic clock. Its owner locks.
type localPacer struct {
	interval []int64
	burst    []int64
	units1   []bool // the limit counts requests: one unit whatever the cost
	tat      []int64
	live     int64
	limits   []headway.Limit
}

// configure paces the pacer at limits shared among live processes. The
// buckets keep their state when neither changed.
func (p *localPacer) configure(limits []headway.Limit, live int64) {
	live = max(live, 1)
	if live == p.live && sameLimits(limits, p.limits) {
		return
	}
	p.limits = append(p.limits[:0], limits...)
	p.live = live
	n := len(limits)
	if len(p.tat) != n {
		p.tat = make([]int64, n)
	}
	p.interval = p.interval[:0]
	p.burst = p.burst[:0]
	p.units1 = p.units1[:0]
	for _, l := range limits {
		p.interval = append(p.interval, int64(l.Interval())*live)
		p.burst = append(p.burst, max(burstOf(l)/live, 1))
		p.units1 = append(p.units1, l.Unweighted)
	}
}

// reserve spends one request of cost units at now, no earlier than
// pauseUntil, and returns when it may leave; it spends nothing when that is
// more than within from now.
func (p *localPacer) reserve(now, pauseUntil, cost, within int64) int64 {
	d := max(now, pauseUntil)
	for i := range p.tat {
		d = max(d, p.tat[i]+(p.units(i, cost)-p.burst[i])*p.interval[i])
	}
	if d-now > within {
		return d
	}
	for i := range p.tat {
		p.tat[i] = max(p.tat[i], d) + p.units(i, cost)*p.interval[i]
	}
	return d
}

func (p *localPacer) units(i int, cost int64) int64 {
	if p.units1[i] {
		return 1
	}
	return cost
}

func burstOf(l headway.Limit) int64 {
	if l.Burst <= 0 {
		return 1
	}
	return int64(l.Burst)
}

func sameLimits(a, b []headway.Limit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
