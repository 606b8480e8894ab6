package headway

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
)

// hostState is what the keys of one host share: the estimate of the
// host's clock, and the scopes of its credentials (see scopeState).
type hostState struct {
	name string // the host, as the URL names it

	offsetNs  atomic.Int64 // the estimate of offset, for readers without the lock
	hasOffset atomic.Bool
	wantDates atomic.Bool // the offset is not known well yet: read every response's Date
	// msResets: an answer stated a reset to the millisecond (see
	// resetPrecision).
	msResets atomic.Bool
	// msDeltas: the host's bare resets count milliseconds, as their fall
	// showed (see learnResetUnit); its responses are parsed so.
	msDeltas atomic.Bool
	// msDelays: an answer's delay proved to count milliseconds
	// (ratelimitheader.Signal.MillisecondDelay); the host's are read so.
	msDelays atomic.Bool
	fallMu   sync.Mutex
	falls    [8]resetSeen // the last reset of a few keys, a ring
	fallNext uint8
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

// clockOffset returns the estimated offset of the host's clock from ours.
func (h *hostState) clockOffset() (time.Duration, bool) {
	if !h.hasOffset.Load() {
		return 0, false
	}
	return time.Duration(h.offsetNs.Load()), true
}

// offsetBounds returns the bounds on the offset of the host's clock from
// ours, once a Date has been read.
func (h *hostState) offsetBounds() (lo, hi time.Duration, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.offset.lo, h.offset.hi, h.offset.n > 0
}

// observeDate narrows the offset with a response whose Date is date, to a
// request sent at sent and answered at recv.
func (h *hostState) observeDate(date, sent, recv time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.learns()
	h.offset.observe(date, sent, recv)
	h.offsetNs.Store(int64(h.offset.estimate()))
	h.hasOffset.Store(true)
	h.wantDates.Store(!h.offset.known())
	switch now := h.learns(); {
	case now && !was:
		h.learning.Add(1)
	case was && !now:
		h.learning.Add(-1)
	}
}

// learns reports whether h is learning its clock's offset: it sent a
// Date, and more are wanted. Its flags change under h.mu.
func (h *hostState) learns() bool { return h.hasOffset.Load() && h.wantDates.Load() }

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
type clockOffset struct {
	lo, hi time.Duration
	n      int
}

// observe narrows the offset with a response whose Date is date, to a
// request sent at sent and answered at recv (our clock).
func (c *clockOffset) observe(date, sent, recv time.Time) {
	lo, hi := date.Sub(recv), date.Add(time.Second).Sub(sent)
	if c.n == 0 || lo > c.hi || hi < c.lo {
		// The first response, or one that contradicts the others: a clock
		// was set. Start again from it.
		c.lo, c.hi, c.n = lo, hi, 1
		return
	}
	c.lo, c.hi, c.n = max(c.lo, lo), min(c.hi, hi), c.n+1
}

// datesEnough is the width of the bounds, and datesMost the number of
// Dates, past which the offset is known well enough: a Date a response
// carries with nothing else is then no longer read. Bounds narrow to the
// time requests spend in flight, and no further.
const (
	datesEnough = 50 * time.Millisecond
	datesMost   = 256
)

// known reports whether the bounds are narrow enough, or have been
// narrowed by enough Dates, that more need not be read.
func (c *clockOffset) known() bool { return c.hi-c.lo <= datesEnough || c.n >= datesMost }

// estimate returns the offset to measure absolute times against: the
// lowest the bounds allow. The server's clock is then never taken to be
// ahead of where it may be, so a wait until an absolute instant is never
// cut short; it is long by at most the width of the bounds, which narrows
// as responses come.
func (c *clockOffset) estimate() time.Duration { return c.lo }

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
	if reset < time.Minute || h.msDeltas.Load() || !h.fallMu.TryLock() {
		return false
	}
	defer h.fallMu.Unlock()
	for i := range h.falls {
		f := &h.falls[i]
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
	h.falls[h.fallNext%uint8(len(h.falls))] = resetSeen{key: k, at: at, reset: reset}
	h.fallNext++
	return false
}
