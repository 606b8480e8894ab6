package headway

import (
	"math"

	"github.com/headway-go/headway/internal/gcra"
)

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
	// buckets, pauseUntil and the first inline bucket fill one cache
	// line of a key (see keyState).
	buckets    gcra.Buckets
	pauseUntil int64     // nothing leaves before this instant
	inline     [2]bucket // the buckets of up to two limits, without a pointer to chase
	win        *windowed // limits counted in the server's fixed windows; nil: none
}

// windowed counts some of a pacer's limits in fixed windows (the server's,
// once it has proven them; see keyState.align) instead of their buckets: a
// limit of Count per Period whose burst is its count lets Count units leave
// in each window, from its boundary on, and no more. Before start, the
// limits' buckets pace them as usual.
type windowed struct {
	mask   uint64  // the buckets counted in windows, by index (the first 64)
	count  []int64 // each one's Count, by index
	used   []int64 // units each has spent in the window that began at start
	anchor int64   // an instant at which a window begins
	period int64   // the windows' length
	start  int64   // where the window being counted began
}

// windowOf returns where the window that holds t begins.
func (w *windowed) windowOf(t int64) int64 {
	k := (t - w.anchor) / w.period
	if (t-w.anchor)%w.period < 0 {
		k--
	}
	return satAdd(w.anchor, satMul(k, w.period))
}

// has reports whether bucket i is counted in windows.
func (w *windowed) has(i int) bool { return i < 64 && w.mask&(1<<i) != 0 }

// spent returns the units bucket i has spent in the window that begins
// at ws.
func (w *windowed) spent(i int, ws int64) int64 {
	if abs64(ws-w.start) < w.period/2 {
		return w.used[i]
	}
	return 0
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
	if p.win == nil {
		return p.buckets.Earliest(max(now, p.pauseUntil), n, cost)
	}
	from, w := max(now, p.pauseUntil), p.win
	for i := range p.buckets {
		if !w.has(i) {
			from = max(from, p.buckets[i:i+1].Earliest(from, n, cost))
		}
	}
	for i := range p.buckets {
		if !w.has(i) {
			continue
		}
		b := &p.buckets[i]
		if from < w.start {
			// Before the first window counted: the bucket, which is full
			// again when that window begins.
			if e := b.Earliest(from, n, cost); e < w.start {
				from = max(from, e)
				continue
			}
			from = w.start
		}
		u := b.Units(n, cost)
		if u > w.count[i] {
			return math.MaxInt64 // more than a window holds
		}
		if ws := w.windowOf(from); w.spent(i, ws)+u > w.count[i] {
			from = satAdd(ws, w.period)
		}
	}
	return from
}

// take spends the cost of one request leaving at d, which must be a value
// earliest allowed.
func (p *pacer) take(d, cost int64) {
	if w := p.win; w != nil && d >= w.start {
		ws := w.windowOf(d)
		if abs64(ws-w.start) >= w.period/2 {
			// A new window: what was spent is forgotten, and the buckets
			// (what paces the limits if the windows are ever given up)
			// start from its boundary.
			w.start = ws
			clear(w.used)
			for i := range p.buckets {
				if w.has(i) {
					p.buckets[i].TAT = min(p.buckets[i].TAT, ws)
				}
			}
		}
		for i := range p.buckets {
			if w.has(i) {
				w.used[i] += p.buckets[i].Units(1, cost)
			}
		}
	}
	p.buckets.Take(d, cost)
}

// giveBack returns the cost of a request that was taken but never sent, as
// far as the buckets are not already full again at now.
func (p *pacer) giveBack(now, cost int64) {
	if w := p.win; w != nil && now >= w.start && abs64(w.windowOf(now)-w.start) < w.period/2 {
		for i := range p.buckets {
			if w.has(i) {
				w.used[i] = max(w.used[i]-p.buckets[i].Units(1, cost), 0)
			}
		}
	}
	p.buckets.GiveBack(now, cost)
}

// countInWindows makes the buckets in mask (with counts, by index) be
// counted in fixed windows of period, one of which begins at anchor, from
// the first boundary after now on; mask 0 gives the windows up.
func (p *pacer) countInWindows(now int64, mask uint64, counts func(i int) int64, anchor, period int64) {
	if mask == 0 || period <= 0 {
		p.win = nil
		return
	}
	w := p.win
	if w == nil || w.mask != mask || abs64(w.period-period) > period/100 {
		w = &windowed{mask: mask, count: make([]int64, len(p.buckets)), used: make([]int64, len(p.buckets))}
		for i := range p.buckets {
			if w.has(i) {
				w.count[i] = counts(i)
			}
		}
		w.anchor, w.period = anchor, period
		w.start = satAdd(w.windowOf(now), period)
		p.win = w
		return
	}
	// The same windows, their boundary measured again: the window being
	// counted keeps its count.
	w.anchor, w.period = anchor, period
	if w.start > now {
		w.start = satAdd(w.windowOf(now), period)
	} else {
		w.start = w.windowOf(satAdd(w.start, period/2)) // the boundary nearest to it
	}
}

// pause stops every departure before until. A pause never shortens an
// earlier, longer one.
func (p *pacer) pause(until int64) { p.pauseUntil = max(p.pauseUntil, until) }

// tooBig reports the first limit whose burst is smaller than cost: such a
// request could never leave. Every burst is at least 1 (see Limit.burst),
// so a request of cost 1 or less, the usual, fits all of them.
func (p *pacer) tooBig(cost int64) (int, bool) {
	if cost <= 1 {
		return 0, false
	}
	return p.buckets.TooBig(cost)
}

// idle reports whether the pacer holds nothing at now: every bucket is full
// and no pause lasts. An idle pacer is the same as a new one.
func (p *pacer) idle(now int64) bool { return p.pauseUntil <= now && p.buckets.Idle(now) }

func satAdd(a, b int64) int64 { return gcra.SatAdd(a, b) }

func satMul(a, b int64) int64 { return gcra.SatMul(a, b) }
