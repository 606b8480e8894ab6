package sharedquota

import (
	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/gcra"
)

// localPacer is the GCRA pacer of one key in this process alone, used while
// Redis is away: the same rule as the shared one (package internal/gcra),
// at the key's limits divided among the live processes. Time is in
// nanoseconds of the quota's monotonic clock. Its owner locks.
type localPacer struct {
	buckets gcra.Buckets
	live    int64
	limits  []headway.Limit
}

// configure paces the pacer at limits shared among live processes. The
// buckets keep their state when neither changed, and their TATs when only
// the number of processes did.
func (p *localPacer) configure(limits []headway.Limit, live int64) {
	live = max(live, 1)
	if live == p.live && sameLimits(limits, p.limits) {
		return
	}
	p.limits = append(p.limits[:0], limits...)
	p.live = live
	if len(p.buckets) != len(limits) {
		p.buckets = make(gcra.Buckets, len(limits))
	}
	for i, l := range limits {
		b := &p.buckets[i]
		b.Interval = gcra.SatMul(int64(l.Interval()), live)
		b.Burst = max(burstOf(l)/live, 1)
		b.Unweighted = l.Unweighted
	}
}

// reserve spends one request of cost units at now, no earlier than
// pauseUntil, and returns when it may leave; it spends nothing when that is
// more than within from now.
func (p *localPacer) reserve(now, pauseUntil, cost, within int64) int64 {
	d := p.buckets.Earliest(max(now, pauseUntil), 1, cost)
	if d-now > within {
		return d
	}
	p.buckets.Take(d, cost)
	return d
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
