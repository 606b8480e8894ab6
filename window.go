package headway

import "math"

// learnedWindow learns a fixed window from the spacing of throttles, for a
// server that says nothing of its quota but names a wait on its 429s (a
// Retry-After, as a date or in seconds; Discord's global retry_after). A
// server that counts fixed windows throttles a client that sends faster
// than it allows at the same point of each window: after the same number
// of requests, with a wait that ends at the next boundary. A cycle runs
// from the end of one named wait to the end of the next; one that let a
// window pass without a throttle lasts two, so the shortest cycle seen is
// the window's length. When two cycles of that length let as many requests
// through (give or take one: another limit may spend some), the server is
// taken for a window of the fewer per that length, with its boundaries
// where the waits ended: the key spends each window's quota, then waits
// for the next boundary. A throttle while the window is in use shows the
// quota one too many: the window keeps one fewer, from the new boundary.
//
// It is pure: time is an argument, in the pacer's nanoseconds; the key
// locks.
type learnedWindow struct {
	prevEnd  int64  // where the cycle being counted began: the end of a wait; 0 for none
	prevSent uint64 // departures sent before then
	curEnd   int64  // the end of the wait its throttles name; 0 for none yet
	curMin   uint64 // the first departure they throttled
	curSent  uint64 // departures sent when the first of them came

	minSpan int64   // the shortest cycle seen
	quota   float64 // the fewest requests such a cycle let through
	agree   int     // cycles of that length that agreed on it

	on     bool
	off    bool    // a window proved wrong in a way only a bucket explains: learn no more
	taken  uint64  // departures taken so far
	start  uint64  // departures taken before the current window began
	limit  float64 // requests per window
	period int64   // the window's length
	end    int64   // the end of the current window
	left   float64 // requests left in it
}

// windowTolerance is how much two cycles of one window may differ in
// length: the wait's end is the response's arrival plus the wait, so the
// response's latency jitters it.
const windowTolerance = int64(50e6) // 50 ms

// throttled learns from a throttle of departure seq naming a wait until
// end, with sent departures so far. The throttles of one cycle come back
// in any order and name the same end; the first departure among them ends
// the requests the cycle let through.
func (w *learnedWindow) throttled(end int64, seq, sent uint64) {
	switch {
	case seq <= w.prevSent:
		return // from a cycle already counted
	case w.curEnd != 0 && abs64(end-w.curEnd) <= windowTolerance:
		// Another of this cycle: it may have left before the first.
		if seq < w.curMin {
			w.curMin = seq
			if w.prevEnd != 0 {
				w.quota = min(w.quota, float64(seq-w.prevSent-1))
				if w.on {
					w.limit = max(min(w.limit, w.quota), 1)
				}
			}
		}
		return
	case w.curEnd != 0 && seq <= w.curSent:
		return // sent before this cycle's first throttle came back
	}
	if w.curEnd != 0 {
		w.prevEnd, w.prevSent = w.curEnd, w.curSent
	}
	w.curEnd, w.curMin, w.curSent = end, seq, sent
	if w.prevEnd != 0 && end > w.prevEnd {
		w.count(float64(seq-w.prevSent-1), end-w.prevEnd)
	}
	switch {
	case w.off:
	case w.on && seq > w.start:
		// Throttled as the (i+1)th request of a window: the first, the
		// boundary is later than it seemed; one of the first half, the
		// server's burst is smaller than the quota, a bucket's; else the
		// quota is i.
		switch i := float64(seq - w.start - 1); {
		case i == 0:
		case i < w.limit/2:
			w.on, w.off = false, true
		default:
			w.limit = max(min(w.limit-1, i), 1)
		}
		w.end, w.left = end, 0
	case !w.on && w.agree >= 2 && w.quota >= 1 && w.minSpan > windowTolerance:
		// Windows are set in round numbers: a cycle measured to within the
		// jitter of a response is taken to the nearest 10 ms.
		w.on, w.limit = true, w.quota
		w.period = max((w.minSpan+5e6)/1e7*1e7, 1e7)
		w.end, w.left = end, 0
	}
}

// count takes in a cycle of span that let q requests through.
func (w *learnedWindow) count(q float64, span int64) {
	switch {
	case w.minSpan == 0 || span < w.minSpan-windowTolerance:
		w.minSpan, w.quota, w.agree = span, q, 1 // a shorter cycle
	case abs64(span-w.minSpan) <= windowTolerance && math.Abs(q-w.quota) <= 1:
		w.quota, w.agree = min(w.quota, q), w.agree+1
	case abs64(span-w.minSpan) <= windowTolerance:
		w.quota, w.agree = q, 1
	}
}

// roll moves the window on to the one that holds now.
func (w *learnedWindow) roll(now int64) {
	if now >= w.end {
		w.start = w.taken
		w.end = satAdd(w.end, satMul((now-w.end)/w.period+1, w.period))
		w.left = w.limit
	}
}

// earliest returns when a request may leave, at or after now. It does not
// change the window: now may be an instant the key only considers.
func (w *learnedWindow) earliest(now int64) int64 {
	if !w.on || now >= w.end || w.left >= 1 {
		return now // a later window has its whole quota
	}
	return w.end
}

// take spends a request of the window at now.
func (w *learnedWindow) take(now int64) {
	w.taken++
	if w.on {
		w.roll(now)
		w.left--
	}
}

// idle reports whether the window holds nothing a new one would not learn
// again.
func (w *learnedWindow) idle() bool { return !w.on && w.curEnd == 0 }

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
