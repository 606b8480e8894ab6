package sharedquota

import (
	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/gcra"
)

// localPacer is the GCRA pacer of one key in this process alone, used while
// Redis is away: the same rule as the shared one (package internal/gcra),
// at the key's limits divided among the live processes. Time is in
// nanoseconds of the quota's monotonic clock. Its owner locks.
//
// It starts empty, not full: when Redis went away, the other processes may
// just have spent the shared burst, and each of them falls back at once
// too. Its departures are what the process tells Redis when it comes back
// (floors), so that a Redis restarted empty does not hand the fleet a
// fresh burst on top of what it sent meanwhile.
type localPacer struct {
	buckets gcra.Buckets
	live    int64
	limits  []headway.Limit
	sent    int64 // requests admitted since start
	last    int64 // the last one's departure
}

// start paces the pacer at limits shared among live processes, with every
// bucket empty at from: the first request leaves one interval after it.
func (p *localPacer) start(limits []headway.Limit, live, from int64) {
	live = max(live, 1)
	p.limits = append(p.limits[:0], limits...)
	p.live = live
	p.sent, p.last = 0, from
	p.buckets = p.buckets[:0]
	for _, l := range limits {
		iv := gcra.SatMul(int64(l.Interval()), live)
		b := max(burstOf(l)/live, 1)
		p.buckets = append(p.buckets, gcra.Bucket{Interval: iv, Burst: b, TAT: gcra.SatAdd(from, gcra.SatMul(b, iv)), Unweighted: l.Unweighted})
	}
}

// configure paces the pacer at limits shared among live processes, keeping
// its state when neither changed, starting it empty at from when they did.
func (p *localPacer) configure(limits []headway.Limit, live, from int64) {
	if max(live, 1) == p.live && sameLimits(limits, p.limits) {
		return
	}
	p.start(limits, live, from)
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
	p.sent++
	p.last = max(p.last, d)
	return d
}

// floors returns, for each of limits, how far ahead of now (in µs) this
// pacer has spent the limit: the least TAT the shared quota may hold for it
// once Redis is back. Limits the pacer does not pace get 0.
//
// A fallback that sent a bucket's worth or more ran as long as the fleet
// sent at the limit: the shared bucket is as empty as this one (its TAT).
// A shorter one (a call or two timed out) charges only the slots it took,
// one shared interval each after its last departure: its empty start was
// a precaution, not requests sent, and charging it would push the whole
// fleet's schedule back each time a call is slow.
func (p *localPacer) floors(dst []int64, limits []headway.Limit, now int64) []int64 {
	same := sameLimits(limits, p.limits)
	for i := range limits {
		f := int64(0)
		switch b := p.bucketOf(i); {
		case !same || p.sent == 0:
		case p.sent >= b.Burst:
			f = max(b.TAT-now, 0) / 1000
		default:
			f = max(p.last+b.Interval/p.live-now, 0) / 1000
		}
		dst = append(dst, f)
	}
	return dst
}

func (p *localPacer) bucketOf(i int) gcra.Bucket {
	if i < len(p.buckets) {
		return p.buckets[i]
	}
	return gcra.Bucket{}
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
