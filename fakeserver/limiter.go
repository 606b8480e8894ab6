package fakeserver

import (
	"math"
	"math/bits"
	"time"
)

// A limiter is the pure core of one key's rate limit. It takes the time as an
// argument and does integer arithmetic only, so its answers are exact and
// repeatable. The time is the server's clock (serverClock), and so are the
// durations it answers. It is not safe for concurrent use; the Server
// serializes calls.
type limiter interface {
	// take decides on one request arriving at now (Unix nanoseconds).
	take(now int64) decision
	// idle reports whether the limiter is back at rest at now, so that
	// forgetting it changes nothing.
	idle(now int64) bool
}

// decision is a limiter's answer for one request.
type decision struct {
	allowed    bool
	remaining  int           // requests that would be admitted right after this one
	capacity   int           // the most remaining can ever be
	resetAfter time.Duration // until remaining is back to capacity
	nextAfter  time.Duration // until remaining is at least one (0 if it is)
	retryAfter time.Duration // if !allowed: until this request would be admitted
}

// newLimiter returns the limiter of one key of cfg.
func newLimiter(cfg *Config) limiter {
	lim := newLimiterOf(cfg.Algorithm, cfg.Limit, cfg.Window, cfg.Burst)
	if wc, ok := lim.(*windowCounter); ok {
		wc.windowEnd = cfg.ResetAtWindowEnd
	}
	return lim
}

// newLimiterOf returns a limiter of alg for limit requests per window, with
// the given burst; the windows of FixedWindow and SlidingWindowCounter
// begin on multiples of window of the time it is given.
func newLimiterOf(alg Algorithm, limit int, window time.Duration, burst int) limiter {
	n, w, b := int64(limit), int64(window), int64(burst)
	switch alg {
	case LeakyBucket:
		return newGCRA(n, w, b)
	case FixedWindow:
		return &fixedWindow{counter{n: n, w: w, start: math.MinInt64}}
	case SlidingWindow:
		return &slidingLog{n: n, w: w}
	case SlidingWindowCounter:
		return &windowCounter{n: n, w: w, k: math.MinInt64}
	case AnchoredWindow:
		return &anchoredWindow{counter{n: n, w: w, start: math.MinInt64}}
	default:
		return &tokenBucket{n: n, w: w, burst: b, tokens: b, last: math.MinInt64}
	}
}

// tokenBucket holds burst tokens and gains n tokens per w nanoseconds.
// The fraction of the next token is kept in acc, in units of 1/w token, so
// n units arrive per nanosecond and w units make one token.
type tokenBucket struct {
	n, w, burst int64
	tokens      int64 // whole tokens, 0..burst
	acc         int64 // 0..w-1, always 0 when tokens == burst
	last        int64 // time of the last refill
}

func (tb *tokenBucket) refill(now int64) {
	if tb.last == math.MinInt64 || now <= tb.last {
		if tb.last == math.MinInt64 {
			tb.last = now
		}
		return // first call, or the clock stood still or went back
	}
	d := now - tb.last
	tb.last = now
	if tb.tokens >= tb.burst {
		return
	}
	need := (tb.burst-tb.tokens)*tb.w - tb.acc // units until full
	if !mulLess(d, tb.n, need) {
		tb.tokens, tb.acc = tb.burst, 0
		return
	}
	units := tb.acc + d*tb.n
	tb.tokens += units / tb.w
	tb.acc = units % tb.w
}

func (tb *tokenBucket) take(now int64) decision {
	tb.refill(now)
	d := decision{capacity: int(tb.burst)}
	if tb.tokens >= 1 {
		tb.tokens--
		d.allowed = true
	}
	d.remaining = int(tb.tokens)
	d.resetAfter = time.Duration(ceilDiv((tb.burst-tb.tokens)*tb.w-tb.acc, tb.n))
	if tb.tokens == 0 {
		d.nextAfter = time.Duration(ceilDiv(tb.w-tb.acc, tb.n))
	}
	if !d.allowed {
		d.retryAfter = d.nextAfter
	}
	return d
}

func (tb *tokenBucket) idle(now int64) bool {
	tb.refill(now)
	return tb.tokens >= tb.burst
}

// rat is the exact instant ns + frac/den nanoseconds, with 0 <= frac < den.
type rat struct{ ns, frac int64 }

func (r rat) add(s rat, den int64) rat {
	r.ns += s.ns
	r.frac += s.frac
	if r.frac >= den {
		r.ns++
		r.frac -= den
	}
	return r
}

func (r rat) sub(s rat, den int64) rat {
	r.ns -= s.ns
	r.frac -= s.frac
	if r.frac < 0 {
		r.ns--
		r.frac += den
	}
	return r
}

// ceil returns the first whole nanosecond at or after r.
func (r rat) ceil() int64 {
	if r.frac > 0 {
		return r.ns + 1
	}
	return r.ns
}

// gcra is the generic cell rate algorithm: a leaky bucket used as a meter,
// with no queue. It keeps the theoretical arrival time (tat) of the next
// request, exactly, as a rational number of nanoseconds with denominator n.
// A request at t is admitted if t >= tat - tau, and then tat = max(tat, t) + T,
// where T = w/n is the emission interval and tau = (burst-1)·T the tolerance.
type gcra struct {
	n, w, burst int64
	t, tau      rat
	tat         rat
	started     bool
}

func newGCRA(n, w, burst int64) *gcra {
	tauUnits := (burst - 1) * w
	return &gcra{
		n: n, w: w, burst: burst,
		t:   rat{w / n, w % n},
		tau: rat{tauUnits / n, tauUnits % n},
	}
}

func (g *gcra) take(now int64) decision {
	if !g.started || g.tat.ns < now || (g.tat.ns == now && g.tat.frac == 0) {
		g.tat, g.started = rat{now, 0}, true
	}
	d := decision{capacity: int(g.burst)}
	if g.tat.sub(g.tau, g.n).ceil() <= now {
		d.allowed = true
		g.tat = g.tat.add(g.t, g.n)
	}
	// The bucket can take k more requests now while now >= tat + (k-1)T - tau.
	x := (now-g.tat.ns)*g.n - g.tat.frac + (g.burst-1)*g.w // (now + tau - tat)·n
	if x >= 0 {
		d.remaining = int(x/g.w + 1)
	}
	d.resetAfter = time.Duration(g.tat.ceil() - now)
	if d.remaining == 0 {
		d.nextAfter = time.Duration(g.tat.sub(g.tau, g.n).ceil() - now)
	}
	if !d.allowed {
		d.retryAfter = d.nextAfter
	}
	return d
}

func (g *gcra) idle(now int64) bool {
	return !g.started || g.tat.ceil() <= now
}

// counter admits n requests in the window [start, start+w); fixedWindow
// and anchoredWindow differ only in where a window starts.
type counter struct {
	n, w  int64
	start int64 // start of the current window
	count int64
}

// admit counts a request at now, in the window that starts at start.
func (c *counter) admit(now, start int64) decision {
	if start != c.start {
		c.start, c.count = start, 0
	}
	d := decision{capacity: int(c.n)}
	if c.count < c.n {
		c.count++
		d.allowed = true
	}
	d.remaining = int(c.n - c.count)
	d.resetAfter = time.Duration(c.start + c.w - now)
	if d.remaining == 0 {
		d.nextAfter = d.resetAfter
	}
	if !d.allowed {
		d.retryAfter = d.nextAfter
	}
	return d
}

// fixedWindow admits n requests in each window [k·w, (k+1)·w) of Unix time.
type fixedWindow struct{ counter }

func (fw *fixedWindow) take(now int64) decision {
	return fw.admit(now, now-floorMod(now, fw.w))
}

func (fw *fixedWindow) idle(now int64) bool {
	return fw.count == 0 || now-floorMod(now, fw.w) != fw.start
}

// windowCounter is the sliding window counter: the counts of admitted
// requests in the fixed windows [k·w, (k+1)·w), the previous one weighted by
// the part of it still inside the sliding window. A request at e into
// window k is admitted if prev·(w-e) + curr·w < n·w (all in units of 1/w
// request, so exact): prev·(w-e) < (n-curr)·w, that is ⌊prev·(w-e)/w⌋ <
// n-curr, computed in 128 bits (n·w overflows 64 for 200,000 a day).
type windowCounter struct {
	n, w       int64
	k          int64 // index of the current window
	prev, curr int64 // admitted in window k-1 and in window k
	windowEnd  bool  // resetAfter is the end of window k (Config.ResetAtWindowEnd)
}

// roll moves the counts to now's window, and returns how far into it now is.
func (wc *windowCounter) roll(now int64) int64 {
	e := floorMod(now, wc.w)
	k := (now - e) / wc.w
	switch {
	case k == wc.k:
	case k == wc.k+1 && wc.k != math.MinInt64:
		wc.prev, wc.curr = wc.curr, 0
	default: // further on, the first request, or a clock that went back
		wc.prev, wc.curr = 0, 0
	}
	wc.k = k
	return e
}

// fadeBy returns the first point e' of a window, from 0, at which a
// previous count prev weighs less than m requests: prev·(w-e') < m·w. It
// is w or more when no point of the window is.
func (wc *windowCounter) fadeBy(prev, m int64) int64 {
	switch {
	case prev < m:
		return 0
	case prev == 0: // m <= 0: nothing weighs less
		return wc.w
	}
	return mulDiv(wc.w, prev-m, prev) + 1
}

func (wc *windowCounter) take(now int64) decision {
	e := wc.roll(now)
	d := decision{capacity: int(wc.n)}
	weight := mulDiv(wc.prev, wc.w-e, wc.w) // what prev weighs, in whole requests
	if wc.curr < wc.n && weight < wc.n-wc.curr {
		wc.curr++
		d.allowed = true
	}
	// The j-th more request is admitted now while weight < n-curr-j+1.
	if a := wc.n - wc.curr - weight; a > 0 {
		d.remaining = int(a)
	}
	left := wc.w - e // until the next window
	// Back to n: a window with no count of its own whose previous one
	// weighs less than one request.
	switch {
	case wc.windowEnd:
		d.resetAfter = time.Duration(left)
	case wc.curr == 0:
		d.resetAfter = time.Duration(max(wc.fadeBy(wc.prev, 1)-e, 0))
	default:
		d.resetAfter = time.Duration(left + wc.fadeBy(wc.curr, 1))
	}
	if d.remaining == 0 {
		if f := wc.fadeBy(wc.prev, wc.n-wc.curr); wc.curr < wc.n && f < wc.w {
			d.nextAfter = time.Duration(f - e) // this window, as prev fades
		} else {
			d.nextAfter = time.Duration(left + wc.fadeBy(wc.curr, wc.n))
		}
	}
	if !d.allowed {
		d.retryAfter = d.nextAfter
	}
	return d
}

func (wc *windowCounter) idle(now int64) bool {
	wc.roll(now)
	return wc.prev == 0 && wc.curr == 0
}

// anchoredWindow admits n requests in each window [start, start+w), where
// start is the first request after the last window ended.
type anchoredWindow struct{ counter }

func (aw *anchoredWindow) take(now int64) decision {
	start := aw.start
	if aw.idle(now) {
		start = now
	}
	return aw.admit(now, start)
}

func (aw *anchoredWindow) idle(now int64) bool {
	return aw.start == math.MinInt64 || now >= aw.start+aw.w || now < aw.start
}

// slidingLog admits a request at t if fewer than n requests were admitted in
// (t-w, t]. It is exact: it keeps the times of the last n admitted requests.
type slidingLog struct {
	n, w int64
	log  []int64 // admitted times in the window, oldest first
}

func (sl *slidingLog) evict(now int64) {
	i := 0
	for i < len(sl.log) && sl.log[i] <= now-sl.w {
		i++
	}
	if i > 0 {
		sl.log = append(sl.log[:0], sl.log[i:]...)
	}
}

func (sl *slidingLog) take(now int64) decision {
	sl.evict(now)
	d := decision{capacity: int(sl.n)}
	if int64(len(sl.log)) < sl.n {
		sl.log = append(sl.log, now)
		d.allowed = true
	}
	d.remaining = int(sl.n) - len(sl.log)
	d.resetAfter = time.Duration(sl.log[len(sl.log)-1] + sl.w - now)
	if d.remaining == 0 {
		d.nextAfter = time.Duration(sl.log[0] + sl.w - now)
	}
	if !d.allowed {
		d.retryAfter = d.nextAfter
	}
	return d
}

func (sl *slidingLog) idle(now int64) bool {
	sl.evict(now)
	return len(sl.log) == 0
}

// mulLess reports whether a·b < c for non-negative a, b, c, without overflow.
func mulLess(a, b, c int64) bool {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return hi == 0 && lo < uint64(c)
}

// mulDiv returns ⌊a·b/c⌋ for non-negative a, b and c > 0 whose quotient
// fits, without overflow in a·b.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// ceilDiv returns ⌈a/b⌉ for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

// floorMod returns a mod m in [0, m) for m > 0.
func floorMod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}
