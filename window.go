package headway

import (
	"math"
	"time"
)

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
// quota too large by the throttles of that window: the window keeps what
// went through, from the new boundary.
//
// What a cycle let through is counted: the requests sent in it less the
// ones throttled, not read from which request was throttled first.
// Requests that leave together reach the server in any order (the flight
// jitters), so the first throttled may be any of them; a cycle is counted
// once all of its answers are in (or, if some never come, when the next
// one begins).
//
// It is pure: time is an argument, in the pacer's nanoseconds; the key
// locks.
type learnedWindow struct {
	// First, what every departure writes (see keyState.takePlain): a
	// key keeps them on one cache line with its model's deps.
	taken  uint64 // departures taken so far
	lastAt int64  // when the last departure left

	prevEnd  int64  // where the cycle being counted began: the end of a wait; 0 for none
	prevSent uint64 // departures sent before then
	curEnd   int64  // the end of the wait its throttles name; 0 for none yet
	curSent  uint64 // departures sent when the first of them came
	curThr   uint64 // throttles of its departures (prevSent, curSent] so far
	curAns   uint64 // answers to them so far
	nextAns  uint64 // answers to departures after curSent (after prevSent, before a cycle)

	minSpan int64   // the shortest cycle seen
	quota   float64 // the fewest requests such a cycle let through

	// A throttle of the window in use: the window's departures when it
	// came (0: none this cycle), the first of them, their throttles so
	// far, and the window's limit before.
	inSent  uint64
	inStart uint64
	inThr   uint64
	inLimit float64

	// b holds the spans the ends lie in, and an anchor to measure the
	// length again from (see windowBounds); nil until the first throttle.
	b     *windowBounds
	first float64 // what the first cycle let through; 0 until counted
	// offset is the server's clock less ours that the ends were read with,
	// when they are instants on the server's clock (Retry-After dates):
	// then dated is set, and the ends move as the estimate does.
	offset int64
	dated  bool

	agree   int32 // cycles of the shortest length that agreed on its quota
	counted bool  // the cycle ending at curEnd is counted
	on      bool
	off     bool // a window proved wrong in a way only a bucket explains: learn no more
	// precise: each throttle names the end of its window to the
	// millisecond, from the first on (a global limit's retry_after), and
	// every answer is counted from the first departure on.
	precise bool
	start   uint64  // departures taken before the current window began
	limit   float64 // requests per window
	period  int64   // the window's length
	end     int64   // the end of the current window
	left    float64 // requests left in it
}

// windowBounds is what a learnedWindow keeps of the spans its cycles'
// ends lie in (see throttledIn): the earliest the present and the last
// cycle may have ended, and the anchor, an end named while the window was
// in use (or when it began to be), with the earliest it may have been: the
// length is measured again from it (see refine).
type windowBounds struct {
	curLo, prevLo    int64
	anchor, anchorLo int64
}

// bounds returns w's bounds, made if need be.
func (w *learnedWindow) bounds() *windowBounds {
	if w.b == nil {
		w.b = new(windowBounds)
	}
	return w.b
}

// windowTolerance is how much two cycles of one window may differ in
// length: the wait's end is the response's arrival plus the wait, so the
// response's latency jitters it.
const windowTolerance = int64(50e6) // 50 ms

// readClock is the estimate of the server's clock less ours that a
// signal's absolute instants were read against: its reset's (0 when it
// was stated as a delay) and, if waitAt, its wait's (a Retry-After date).
type readClock struct {
	reset, wait time.Duration
	waitAt      bool
}

// reclock notes, before a throttle whose wait ends at an instant on the
// server's clock, that it was read with offset off: the ends read before
// with another estimate move by the difference. The estimate narrows as
// Dates come, by up to a second, and cycles measured across the change
// would be that much off (a window of 2 s seen as 1.58 s, which no later
// cycle agrees with).
func (w *learnedWindow) reclock(off int64) {
	w.dated = true
	if d := off - w.offset; d != 0 {
		for _, e := range []*int64{&w.prevEnd, &w.curEnd, &w.end} {
			if *e != 0 {
				*e -= d
			}
		}
		if b := w.b; b != nil {
			for _, e := range []*int64{&b.prevLo, &b.anchor, &b.anchorLo, &b.curLo} {
				if *e != 0 {
					*e -= d
				}
			}
		}
		w.offset = off
	}
}

// unheard notes, before a throttle of sent departures so far may open a
// cycle while nothing was being learned (the answers that said nothing
// were not counted), that pending of them are not answered yet: the
// others were.
func (w *learnedWindow) unheard(sent, pending uint64) {
	if !w.learning() && !w.precise && sent >= w.curSent {
		n := sent - w.curSent
		w.nextAns = n - min(pending, n)
	}
}

// throttled learns from a throttle of departure seq naming a wait until
// end, with sent departures so far. The throttles of one cycle come back
// in any order and name the same end.
func (w *learnedWindow) throttled(end int64, seq, sent uint64) {
	w.throttledIn(end, end, seq, sent)
}

// throttledIn is throttled for a wait whose end lies in [lo, end]: a wait
// stated as a delay ends that long after the server decided, which was
// after the request left (lo: its departure plus the wait) and before its
// answer came (end: the answer's arrival plus the wait).
func (w *learnedWindow) throttledIn(lo, end int64, seq, sent uint64) {
	lo = min(lo, end)
	b := w.bounds()
	switch {
	case seq <= w.prevSent:
		return // from a cycle already counted
	case w.curEnd != 0 && (abs64(end-w.curEnd) <= windowTolerance || lo < end && lo <= w.curEnd && end >= b.curLo):
		// Another of this cycle (or their spans meet: answers whose
		// flights differ by more than the tolerance). Each names the end
		// as its answer's arrival plus its wait, after the true end by the
		// answer's flight: the earliest is the nearest.
		b.curLo = max(b.curLo, lo)
		if end < w.curEnd {
			if w.end == w.curEnd {
				w.end = end
			}
			if b.anchor == w.curEnd {
				b.anchor = end
				b.anchorLo = max(b.anchorLo, lo)
			}
			w.curEnd = end
		}
		if seq <= w.curSent && !w.counted {
			w.curThr++
		}
		if w.inSent != 0 && seq > w.inStart {
			w.inThr++
			w.judge()
		}
		return
	case w.curEnd != 0 && seq <= w.curSent:
		return // sent before this cycle's first throttle came back
	}
	if w.curEnd != 0 {
		w.complete() // the answers that have not come will not
		w.prevEnd, w.prevSent, b.prevLo = w.curEnd, w.curSent, b.curLo
	}
	// The answers so far to departures after prevSent are this cycle's.
	w.curEnd, w.curSent, w.curThr, w.curAns, w.nextAns, w.counted = end, sent, 1, w.nextAns, 0, false
	b.curLo, w.inSent = lo, 0
	switch {
	case w.off:
	case w.on && seq > w.start:
		w.refine(lo, end)
		// Throttled in the window in use. A wait that ends near where the
		// window began: the boundary is later than it seemed. One that
		// ends with the window: the quota is what went through, unless
		// that is under half of it: the server's burst is smaller than
		// the quota, a bucket's.
		if end >= w.end-w.period/2 {
			w.inSent, w.inStart, w.inThr, w.inLimit = sent-w.start, w.start, 1, w.limit
			w.judge()
		}
		w.end, w.left = end, 0
	}
}

// answered notes the answer, throttled or not, to departure seq (after
// throttled, for a throttle): once the answers to a cycle's departures
// are all in, the cycle is counted.
func (w *learnedWindow) answered(seq uint64) {
	switch {
	case seq <= w.prevSent:
	case w.curEnd == 0 || seq > w.curSent:
		w.nextAns++
	default:
		if w.curAns++; w.curAns >= w.curSent-w.prevSent {
			w.complete()
		}
	}
}

// learning reports whether answers that say nothing of the quota count:
// a cycle is open and no window is in use, or ruled out.
func (w *learnedWindow) learning() bool { return w.curEnd != 0 && !w.on && !w.off }

// complete counts the cycle ending at curEnd, once: its departures
// (prevSent, curSent] less the ones its throttles named. Two cycles as long
// that let as many through make a window.
func (w *learnedWindow) complete() {
	if w.counted || w.curEnd == 0 {
		return
	}
	w.counted = true
	through := float64(w.curSent-w.prevSent) - float64(w.curThr)
	if w.prevEnd == 0 {
		w.first = max(through, 1)
	}
	if w.prevEnd == 0 || w.curEnd <= w.prevEnd {
		return
	}
	b := w.bounds()
	w.count(through, span(b.prevLo, w.prevEnd, b.curLo, w.curEnd))
	if !w.on && !w.off && w.agree >= 2 && w.quota >= 1 && w.minSpan > windowTolerance {
		w.on, w.limit = true, w.quota
		w.period = roundPeriod(w.minSpan)
		w.end, w.left = w.curEnd, 0
		b.anchor, b.anchorLo = w.curEnd, b.curLo
	}
}

// refine measures the length of a window in use again from end, the end
// of a window that a throttle named, and the anchor, an end named windows
// before: each end is read as an answer's arrival plus its wait, late by
// the answer's flight, so the shortest cycles, which set the length, are
// short by up to the flight's jitter (by 10-20 ms with 20 ms of it), and
// boundaries counted on from one end drift early by as much a window,
// until requests sent just before a boundary are throttled (every third
// window). Over n windows, the error is the jitter over n.
//
// The length is measured between the middles of the spans the two ends
// lie in (see span), and only when the span between them is near a whole
// number of windows of the length known: a length far off (6 % short,
// with 100 ms of jitter) would count them wrong over a long span, and
// walk the length further off.
func (w *learnedWindow) refine(lo, end int64) {
	b := w.b
	if b == nil || b.anchor == 0 || end <= b.anchor || w.period <= 0 {
		return
	}
	sp := span(b.anchorLo, b.anchor, lo, end)
	n := (sp + w.period/2) / w.period
	if n < 2 || abs64(sp-n*w.period) > w.period/4 {
		return // no whole number of windows known
	}
	if p := sp / n; abs64(p-w.period) <= windowTolerance {
		w.period = p
	}
}

// roundPeriod returns the length of a window measured as span: windows
// are set in round numbers, and a cycle measured to within the jitter of
// a response is taken to the whole second within windowTolerance, or else
// to the 100 ms within 10 ms, or else to the nearest 10 ms. (A second
// measured as 993 ms, taken as 990, drifted 10 ms a window early, and
// the sixth window's requests went before the server's boundary.)
func roundPeriod(span int64) int64 {
	for _, u := range []struct{ unit, tol int64 }{{1e9, windowTolerance}, {1e8, 1e7}} {
		if m := (span + u.unit/2) / u.unit * u.unit; m > 0 && abs64(span-m) <= u.tol {
			return m
		}
	}
	return max((span+5e6)/1e7*1e7, 1e7)
}

// span returns the time from one end to another, each known to lie in a
// span [lo, hi] (see throttledIn): from the middle of one to the middle of
// the other. The shortest of the spans from hi to hi (what the answers'
// arrivals say) is short by the flight's jitter; the middle halves the
// error. An end saturated by a wait of centuries makes a long span, not
// an overflow.
func span(lo0, hi0, lo1, hi1 int64) int64 {
	lo0, lo1 = min(lo0, hi0), min(lo1, hi1)
	return satAdd(lo1-lo0, hi1-hi0) / 2
}

// judge sets the limit of a window in use from the throttles of its
// departures: what went through, or, under half the limit, no window.
func (w *learnedWindow) judge() {
	if w.off || !w.on {
		return
	}
	through := float64(w.inSent) - float64(w.inThr)
	if through < w.inLimit/2 && w.precise {
		// A server that names its global window's end is no bucket: the
		// window learned is wrong (a cycle of two windows taken for one,
		// when demand came every other window); learn it again.
		w.on, w.minSpan, w.quota, w.agree = false, 0, 0, 0
		return
	}
	if through < w.inLimit/2 {
		w.on, w.off = false, true
		return
	}
	w.limit = max(min(w.inLimit-1, through), 1)
}

// count takes in a cycle of span that let q requests through.
func (w *learnedWindow) count(q float64, span int64) {
	q = max(q, 0)
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
	if w.on {
		w.roll(now)
		w.left--
	}
	w.taken++
	w.lastAt = now
}

// sustained returns the requests per second that the shortest cycles
// counted let through, at the fewest; 0 before one is counted. A server
// of fixed windows sustains that much; so does a bucket, whose wait,
// rounded up, outlasts the refill of its burst.
func (w *learnedWindow) sustained() float64 {
	if w.off || w.minSpan <= 0 || w.quota < 1 {
		return 0
	}
	return w.quota / (float64(w.minSpan) / 1e9)
}

// probeAt returns, for a window being learned, when a departure at d may
// leave at the earliest, and ok true if it is held: once the last named
// end has passed and the quota counted so far is spent after it, each
// further request goes alone, after the answers to every one before it in
// the cycle (or at latest), until one is throttled and names the next
// end, which measures the window's length. A throttle of the cycle costs
// one request, not every one in flight, and the requests that find room
// beyond the quota counted go through. (A server that refills a bucket
// answers each of them in turn as the bucket allows.)
func (w *learnedWindow) probeAt(d, latest int64) (int64, bool) {
	if w.on || w.off || w.first == 0 || w.curEnd == 0 || d < w.curEnd {
		return 0, false
	}
	q := w.first
	if w.minSpan > 0 {
		q = max(w.quota, 1) // the fewest the shortest cycles let through
	}
	if n := w.taken - w.curSent; float64(n) < q || w.nextAns >= n {
		return 0, false
	}
	return latest, true
}

// stale reports whether w is being learned from a cycle whose end is long
// past at now (learnStale, or two of the shortest cycles seen, whichever
// is longer): no throttle has come since, so demand no longer reaches the
// window, and a new one would learn as much from the next throttles.
func (w *learnedWindow) stale(now int64) bool {
	return w.learning() && now-w.curEnd > max(learnStale, satMul(2, w.minSpan))
}

// learnStale is how long after the end of its last cycle a window being
// learned is still worth keeping (see stale): as long as a cut pace is
// (see aimd.idle), and long enough for the first cycle of a window of
// minutes to be counted.
const learnStale = int64(10 * time.Minute)

// probeCap returns how long after the last departure a probe (see
// probeAt) waits at most for the answers to the ones before, given how
// long it would wait otherwise: no longer than an interval at the pace
// the cycles let through, once the probes have gone on for longer than a
// cycle without a throttle. One at a time, an answer apart, is slower than
// the window's quota over its length once an answer takes longer than the
// length over the quota (150 ms against 20 per 2 s, or 10 per 1 s): no
// window is overrun again to say where it ends, so it is never learned,
// and the key would send under the server's rate for good (0.3-0.67 of
// it). Before that, the probes wait for answers: one throttle, not every
// one in flight, ends a cycle.
//
// The pace is the faster of what the shortest cycles sustained and pace,
// what a cycle of span let through (see firstCycle): a cycle counted while
// the probes went slow lets through as little, and would keep them slow.
func (w *learnedWindow) probeCap(wait int64, pace float64, span int64) int64 {
	r, sp := w.sustained(), w.minSpan
	if pace > r {
		r, sp = pace, span
	}
	if r > 0 && w.lastAt-w.curEnd > sp {
		wait = min(wait, int64(1e9/r))
	}
	return wait
}

// firstCycle returns, while the first cycle is the one counted, the pace
// it let through from firstAt (when the first departure left) to the end
// of its wait, at most a window plus an answer's time, and that span; 0s
// otherwise.
func (w *learnedWindow) firstCycle(firstAt int64) (pace float64, span int64) {
	if w.prevEnd != 0 || w.first <= 0 || firstAt == 0 || w.curEnd <= firstAt {
		return 0, 0
	}
	span = w.curEnd - firstAt
	return w.first / (float64(span) / 1e9), span
}

// idle reports whether the window holds nothing a new one would not learn
// again at now, or nothing worth the memory: none is in use but one unused
// for learnStale (or two of its periods, if longer), nor being learned but
// from a cycle long past (see stale). A key per path that learned a window
// once does not stay in the key table forever; used again, it learns the
// window again, as a cut pace is forgotten after as long (see aimd.idle).
func (w *learnedWindow) idle(now int64) bool {
	if w.on {
		return now-w.lastAt > max(learnStale, satMul(2, w.period))
	}
	return w.curEnd == 0 || w.stale(now)
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// A configured limit is a bucket (see [Limit]): Count per Period, Burst at
// once. A server that counts fixed windows gives its whole quota back at
// each boundary, which a bucket of the same Count and Period never does:
// paced by it, a key spends a window's quota at once only after an idle
// spell, and between boundaries no faster than Count per Period, so it
// loses up to a window's worth of time against the server it was
// configured for. Once the server has proven fixed windows as long as a
// limit's Period (its answers' resets stay put while the quota drains and
// come back whole, see serverModel; or its throttles' waits end a window
// apart, see learnedWindow), a limit whose burst is its whole count is
// counted in those windows instead: Count units in each, from its
// boundary on (the latest instant the server's clock allows), and none
// more until the next. The limit then still bounds what each of the
// server's windows receives; only across a boundary may more than Burst
// leave within a short span, as the server itself allows.

// windowMatch is how far a window's measured length may be from a limit's
// Period for the limit to be counted in it: the boundaries are measured on
// an estimate of the server's clock.
func windowMatch(period int64) int64 { return max(windowTolerance, period/20) }

// provenWindow returns an instant at which one of the fixed windows the
// server has proven begins, on the pacer's clock, and their length; ok is
// false when it has proven none.
func (k *keyState) provenWindow() (anchor, period int64, ok bool) {
	if m := &k.model; m.window && m.period > 0 && m.resetSeen > 0 {
		return m.resetSeen, m.period, true
	}
	if w := &k.window; w.on && w.period > 0 {
		return w.end, w.period, true
	}
	return 0, 0, false
}

// align counts, under k.mu at now, each configured limit whose burst is
// its count in the fixed windows the server has proven, if they are as
// long as its Period; or gives the windows up, if the server no longer
// proves them.
func (k *keyState) align(now int64) {
	if len(k.lims) == 0 {
		return
	}
	anchor, period, ok := k.provenWindow()
	var mask uint64
	var length int64
	if ok {
		for i, l := range k.lims {
			if p := int64(l.Period); i < 64 && l.Burst == l.Count && abs64(p-period) <= windowMatch(p) {
				mask |= 1 << i
				length = p
			}
		}
	}
	if mask == 0 && k.pacer.win == nil {
		return
	}
	k.pacer.countInWindows(now, mask, func(i int) int64 { return int64(k.lims[i].Count) }, anchor, length)
}
