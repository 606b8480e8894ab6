package headway

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
)

// hostState is what the keys of one host share: the estimate of the
// host's clock, and the scopes of its credentials (see scopeState).
type hostState struct {
	name string // the host, as the URL names it

	// estimate is the estimate of offset, for readers without the lock,
	// and when it was made (it ages: see clockOffset); nil until a Date
	// is read. One pointer, so that the two are read together.
	estimate atomic.Pointer[offsetEstimate]
	// knownUntil is when the offset's bounds, widening with age, are no
	// longer known well (Unix ns of ours): Dates are read again.
	knownUntil atomic.Int64
	wantDates  atomic.Bool // the offset is not known well yet: read every response's Date
	// msResets: an answer stated a reset to the millisecond (see
	// resetPrecision).
	msResets atomic.Bool
	// msDeltas: the host's bare resets count milliseconds, as their fall
	// showed (see learnResetUnit); its responses are parsed so.
	msDeltas atomic.Bool
	// msDelays: an answer's delay proved to count milliseconds
	// (ratelimitheader.Signal.MillisecondDelay); the host's are read so.
	msDelays atomic.Bool
	// falls is what learnResetUnit compares, made at the first reset long
	// enough to tell: most hosts never state one, and every key of a new
	// host pays for what its hostState holds (see BenchmarkOverhead's churn).
	falls atomic.Pointer[resetFalls]
	// conns is what carries the host's requests, as its answers showed:
	// connsUnknown, connsHTTP1, connsNone or connsHTTP2 (see connWatch).
	conns atomic.Uint32
	// hungIn is the mark of the silence of a key of the host in which a
	// caller last gave up on a request that went unanswered for a stall
	// (see keyState.hung): here, since a key has no room to spare for
	// what is this rare.
	hungIn atomic.Uint64

	mu     sync.Mutex
	refs   int         // keys that point here
	offset clockOffset // the server's clock less ours
	// The scopes of its credentials (see scope): the first one made, and
	// the others by credential. Most hosts are reached with one credential
	// (or none) at a time: they need no map.
	scope1 *scopeState
	scopes map[uint64]*scopeState
	// spare is made with the host, for its first scope; nil once taken.
	spare *scopeState

	learning *atomic.Int64 // keyEnv.learningHosts
}

// clockOffset returns the estimated offset of the host's clock from ours
// at now (our clock): the estimate the bounds gave when last narrowed, less
// what the clocks may have drifted apart since (see driftMost).
func (h *hostState) clockOffset(now time.Time) (time.Duration, bool) {
	e := h.estimate.Load()
	if e == nil {
		return 0, false
	}
	return e.offset - drifted(now.UnixNano()-e.at), true
}

// offsetEstimate is an estimate of a host's offset, made at at (Unix ns of
// ours); never changed once published.
type offsetEstimate struct {
	offset time.Duration
	at     int64
}

// offsetBounds returns the bounds on the offset of the host's clock from
// ours at now, once a Date has been read.
func (h *hostState) offsetBounds(now time.Time) (lo, hi time.Duration, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lo, hi = h.offset.bounds(now)
	return lo, hi, h.offset.n > 0
}

// observeDate narrows the offset with a response whose Date is date, to a
// request sent at sent and answered at recv.
func (h *hostState) observeDate(date, sent, recv time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.offset.observe(date, sent, recv)
	h.offsetChanged()
}

// offsetChanged publishes the offset's new estimate. Called with h.mu held.
func (h *hostState) offsetChanged() {
	was := h.learns()
	h.estimate.Store(&offsetEstimate{h.offset.lo, h.offset.at})
	h.wantDates.Store(!h.offset.known(time.Unix(0, h.offset.at)))
	h.knownUntil.Store(h.offset.knownUntil())
	switch now := h.learns(); {
	case now && !was:
		h.learning.Add(1)
	case was && !now:
		h.learning.Add(-1)
	}
}

// learns reports whether h is learning its clock's offset: it sent a
// Date, and more are wanted. Its flags change under h.mu.
func (h *hostState) learns() bool { return h.estimate.Load() != nil && h.wantDates.Load() }

// readsDate reports whether the answer to departure seq of k, an answer
// that says nothing else, is read for its Date: while the offset of its
// host's clock is not known well, every answer is. A host none of whose
// answers carried a Date before a key's datesAbsent-th most likely sends
// none; that key's answers are then looked at once in datesAbsent, which
// costs a header look-up in datesAbsent instead of one an answer. Past its
// datesAbsent-th answer, a key reads its host's memory (with many keys
// likely out of the CPU's nearer caches) only while some host learns its
// clock.
func (k *keyState) readsDate(seq uint64) bool {
	h := k.host
	if seq <= datesAbsent || seq%datesAbsent == 0 {
		if !h.wantDates.Load() && h.estimate.Load() != nil && k.env.wall(k.env.now()).UnixNano() > h.knownUntil.Load() {
			// The bounds have widened with age: narrow them again. (The
			// clock is read only for a host whose offset is known: a
			// key's first 64 answers come here.)
			now := k.env.wall(k.env.now())
			h.mu.Lock()
			was := h.learns()
			h.wantDates.Store(!h.offset.known(now))
			if h.learns() && !was {
				h.learning.Add(1)
			}
			h.mu.Unlock()
		}
		return h.wantDates.Load()
	}
	return k.env.learningHosts.Load() != 0 && h.learns()
}

const datesAbsent = 64

// clockOffset bounds the offset of a server's clock from ours. A Date
// header has whole seconds and was written between the request's departure
// and the response's arrival, so each response bounds the offset to an
// interval of a little over a second; intersecting the intervals of many
// responses narrows it. Absolute times in headers are then measured
// against our clock plus the offset, not against one coarse Date.
//
// Two clocks that keep time apart drift apart: bounds narrowed once hold
// only as long as neither moves. So the bounds widen with their age by
// what clocks drift at most (driftMost), and Dates are read again when
// they have widened (see knownUntil). Without it, a server whose clock
// lost half a millisecond a second (as NTP slews one) fell behind the
// estimate, which only a Date contradicting the bounds moved: every
// worker was sent a little before a window turned, and the bounds began
// again from a second's width: GitHub's windows of 100 per 10 s came out
// at 0.75 of the least time over a minute, with 32 throttles in a window.
type clockOffset struct {
	lo, hi time.Duration
	n      int
	at     int64         // when lo and hi were the bounds, Unix ns of ours
	best   time.Duration // the narrowest the bounds have been
}

// driftMost is how fast two clocks may drift apart, and the bounds on
// their offset widen: a millisecond a second, twice what NTP slews a
// clock by at most. A clock that drifts faster, or one that is set, is
// caught only by a Date that contradicts the bounds.
const driftMost = time.Millisecond

// drifted returns how far two clocks may have drifted apart in d
// nanoseconds (0 if d is not positive).
func drifted(d int64) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(d / int64(time.Second/driftMost))
}

// bounds returns the bounds at now: widened by what the clocks may have
// drifted since they were narrowed.
func (c *clockOffset) bounds(now time.Time) (lo, hi time.Duration) {
	d := drifted(now.UnixNano() - c.at)
	return c.lo - d, c.hi + d
}

// observe narrows the offset with a response whose Date is date, to a
// request sent at sent and answered at recv (our clock).
func (c *clockOffset) observe(date, sent, recv time.Time) {
	lo, hi := date.Sub(recv), date.Add(time.Second).Sub(sent)
	clo, chi := c.bounds(recv)
	if c.n == 0 || lo > chi || hi < clo {
		// The first response, or one that contradicts the others: a clock
		// was set. Start again from it.
		c.lo, c.hi, c.n, c.at, c.best = lo, hi, 1, recv.UnixNano(), hi-lo
		return
	}
	c.lo, c.hi, c.n, c.at = max(clo, lo), min(chi, hi), c.n+1, max(recv.UnixNano(), c.at)
	c.best = min(c.best, c.hi-c.lo)
}

// datesEnough is the width of the bounds, and datesMost the number of
// Dates, past which the offset is known well enough: a Date a response
// carries with nothing else is then no longer read. Bounds narrow to the
// time requests spend in flight, and no further.
const (
	datesEnough = 50 * time.Millisecond
	datesMost   = 256
)

// known reports whether the bounds are narrow enough at now, or have been
// narrowed by enough Dates (and have not widened with age by more than
// datesEnough since), that more need not be read.
func (c *clockOffset) known(now time.Time) bool {
	lo, hi := c.bounds(now)
	return hi-lo <= datesEnough || (c.n >= datesMost && hi-lo <= c.best+datesEnough)
}

// knownUntil returns when, at the latest, the bounds widen with age past
// what known accepts (Unix ns of ours); math.MinInt64 if they are not
// known now.
func (c *clockOffset) knownUntil() int64 {
	most := datesEnough
	if c.n >= datesMost {
		most = max(most, c.best+datesEnough)
	}
	spare := most - (c.hi - c.lo)
	if spare < 0 {
		return math.MinInt64
	}
	// Each bound moves driftMost a second: the width, twice that.
	return c.at + int64(spare)/2*int64(time.Second/driftMost)
}

// estimate returns the offset to measure absolute times against at now:
// the lowest the bounds allow. The server's clock is then never taken to be
// ahead of where it may be, so a wait until an absolute instant is never
// cut short; it is long by at most the width of the bounds, which narrows
// as responses come.
func (c *clockOffset) estimate(now time.Time) time.Duration {
	lo, _ := c.bounds(now)
	return lo
}

// hostTable holds the hostStates that keys point to, and drops each when
// its last key goes.
type hostTable struct {
	mu sync.Mutex
	m  map[string]*hostState

	learning *atomic.Int64 // keyEnv.learningHosts
}

func (ht *hostTable) get(host string) *hostState {
	ht.mu.Lock()
	defer ht.mu.Unlock()
	h := ht.m[host]
	if h == nil {
		if ht.m == nil {
			ht.m = make(map[string]*hostState)
		}
		// A host is made for a key, which asks for a scope at once: both
		// are made in one allocation.
		hs := &struct {
			h  hostState
			sc scopeState
		}{h: hostState{name: host, learning: ht.learning}}
		h = &hs.h
		h.spare = &hs.sc
		h.wantDates.Store(true)
		ht.m[host] = h
	}
	h.refs++
	return h
}

func (ht *hostTable) put(host string, h *hostState) {
	ht.mu.Lock()
	defer ht.mu.Unlock()
	if h.refs--; h.refs == 0 && ht.m[host] == h {
		delete(ht.m, host)
		h.mu.Lock()
		if h.learns() {
			h.learning.Add(-1)
		}
		h.mu.Unlock()
	}
}

// resetFalls is the last reset of a few keys of a host, a ring (see
// learnResetUnit).
type resetFalls struct {
	mu   sync.Mutex
	seen [8]resetSeen
	next uint8
}

// resetSeen is a reset a key's response stated, read at.
type resetSeen struct {
	key   *keyState
	at    time.Time
	reset time.Duration
	falls int // pairs of the key's answers that showed milliseconds, in a row
}

// learnResetUnit takes in the reset, read in seconds, that a response to
// key k stated at, and reports whether it and the key's last ones show the
// host's bare resets to count milliseconds: two pairs of answers in a row
// whose resets fell a thousand times faster than the clock
// (ratelimitheader.ResetsFall); a pair 50 ms apart or more whose reset
// fell as a reset in seconds does starts the count again. From then on
// the host's responses are parsed so: a server states every reset of a
// host alike, so one key's fall tells for all. Only resets long enough to
// be a millisecond reset read as seconds (a minute or more: a reset of 60
// ms) are compared, and only when no other key of the host is comparing,
// so that the common answer pays one atomic load.
func (h *hostState) learnResetUnit(k *keyState, at time.Time, reset time.Duration) bool {
	if reset < time.Minute || h.msDeltas.Load() {
		return false
	}
	r := h.falls.Load()
	if r == nil {
		h.falls.CompareAndSwap(nil, new(resetFalls))
		r = h.falls.Load()
	}
	if !r.mu.TryLock() {
		return false
	}
	defer r.mu.Unlock()
	for i := range r.seen {
		f := &r.seen[i]
		if f.key != k {
			continue
		}
		elapsed := at.Sub(f.at)
		switch {
		case ratelimitheader.ResetsFall(f.reset, reset, elapsed):
			f.falls++
		case elapsed >= 50*time.Millisecond && reset < f.reset && f.reset-reset <= elapsed+2*time.Second:
			f.falls = 0 // fell as the clock does
		}
		f.at, f.reset = at, reset
		if f.falls >= 2 {
			h.msDeltas.Store(true)
			return true
		}
		return false
	}
	r.seen[r.next%uint8(len(r.seen))] = resetSeen{key: k, at: at, reset: reset}
	r.next++
	return false
}
