package headway

import (
	"hash/maphash"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A server's global limit (Discord's X-RateLimit-Global, the scope
// "global") spans every route of one credential, not every key of the
// host: two bot tokens on one host have a global limit each. So the keys
// of one host are grouped by the credential of the request that made each
// one (a hash of its Authorization header, or of X-Api-Key without one;
// the credential itself is never kept), and a global throttle pauses the
// keys of that group, its scope, and no other. Requests without a
// credential share one scope per host.
//
// A global limit states nothing until it throttles, and then only when
// its window ends (Discord's retry_after, to the millisecond). The scope
// learns it as a fixed window from those ends (see learnedWindow): what
// its requests let through between two of them is its quota, and their
// spacing its length; then every key of the scope spends each window's
// quota and waits for its end, whatever route it paces. To count what a
// window let through from the first, a scope counts its departures once
// its server has named a bucket (a server that has per-route buckets may
// have a global limit over them) or throttled globally; until then, a
// key's departures cost the scope nothing.
//
// A key whose requests carry several credentials (one key for a host)
// belongs to the scope of the first: a global throttle of any of them
// pauses that scope, as it holds them all in one queue.

// scopeState is what the keys of one credential on one host share: the
// pause of a global throttle and the global window learned from them.
type scopeState struct {
	pauseUntil atomic.Int64 // pacer nanoseconds; nothing of the scope leaves before
	active     atomic.Bool  // departures are counted in the window (under mu)
	learning   atomic.Bool  // answers that say nothing count in the window (under mu)

	cred uint64 // the hash of its credential; 0 for none
	mu   sync.Mutex
	refs int // keys that point here
	// What the scope counts of its departures and answers, made when it
	// begins to (see counting): most scopes never do, and every new host
	// makes one. Its fields are read and written under mu, once made.
	*scopeCount
}

// scopeCount is what a scope counts once it counts its departures.
type scopeCount struct {
	lastAt  int64 // when the last departure counted left
	firstAt int64 // when the first departure counted left
	// firstPace is what the window's first cycle let through a second,
	// over firstSpan (see learnedWindow.firstCycle).
	firstPace float64
	firstSpan int64
	rtt       int64         // the time its answers take, an average of the last few
	rttVar    int64         // how far they are from it, an average (as TCP's RTTVAR)
	sent      uint64        // departures counted so far; the last one's number
	window    learnedWindow // the global window, from the global throttles
	// Until its first global throttle, the scope's departures ramp up
	// (see rampStart): those counted and not answered yet, and the
	// answers that were not a global throttle.
	out, through int
	globalSeen   bool
	answerAt     int64 // when the last answer came
}

// counting makes sc's counts, if they are not made yet. sc.mu is held.
func (sc *scopeState) counting() {
	if sc.scopeCount == nil {
		sc.scopeCount = new(scopeCount)
	}
}

// A global limit states nothing before it throttles, and a key whose
// server names buckets may have one over them: each bucket says how much
// is left of its own, and the routes together may ask for many times the
// global quota at once (six routes with a queue each, freed together by
// their first answers, sent 25 requests into a global window of 10). So
// until its first global throttle a scope ramps up, as TCP's slow start
// does, only slower: rampStart departures may be unanswered, and one more
// for every rampGrowth answers that were not a global throttle, which
// grows what may leave by a quarter a round trip. What is in flight when
// the global limit is first met is throttled, so the slower the ramp the
// fewer (32 workers, six routes, a global window of 10: 13 throttles a run
// when doubling, 8 at a quarter, 6 with no growth at all, which would
// leave a server with no global limit, or a high one, at rampStart a round
// trip). The first global throttle ends the ramp, and its window is
// learned from there (see learnedWindow).
const (
	rampStart  = 4
	rampGrowth = 4
)

func (sc *scopeState) pause(until int64) {
	for {
		cur := sc.pauseUntil.Load()
		if until <= cur || sc.pauseUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// activate starts counting the scope's departures.
func (sc *scopeState) activate() {
	if !sc.active.Load() {
		sc.mu.Lock()
		sc.counting()
		sc.window.precise = true
		sc.active.Store(true)
		sc.mu.Unlock()
	}
}

// earliest returns when a request of the scope may leave, at or after d,
// as far as its global window allows.
func (sc *scopeState) earliest(d int64) int64 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.earliestLocked(d)
}

func (sc *scopeState) earliestLocked(d int64) int64 {
	sc.counting()
	if !sc.globalSeen {
		if sc.out >= rampStart+sc.through/rampGrowth {
			// The answer that lets the next go dispatches its key; the
			// other keys of the scope look again a while after, and go
			// then, after the answers of that instant too (see below).
			return max(d, satAdd(sc.lastAt, sc.rampHold()+1))
		}
		// What an answer lets go leaves after the answers that came at
		// the same instant are taken in: one of them may be the first
		// global throttle (in virtual time, at least, they come together).
		if sc.answerAt != 0 {
			d = max(d, sc.answerAt+1)
		}
	}
	if sc.window.on {
		return max(d, sc.window.earliest(d))
	}
	if pace, span := sc.window.firstCycle(sc.firstAt); pace > 0 {
		sc.firstPace, sc.firstSpan = pace, span // kept: see learnedWindow.probeCap
	}
	if at, ok := sc.window.probeAt(d, satAdd(sc.lastAt, sc.window.probeCap(sc.holdFor(), sc.firstPace, sc.firstSpan))); ok {
		return max(d, at)
	}
	return d
}

// take counts a departure free to go at d, which leaves at at, and
// returns its number in the scope; ok is false, and nothing is counted,
// if the window no longer lets it go at d: another key took it since.
func (sc *scopeState) take(d, at int64) (seq uint64, ok bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.earliestLocked(d) > d {
		return 0, false // by the rule earliest applies, or the key would look again at once
	}
	if sc.sent == 0 {
		sc.firstAt = at
	}
	sc.sent++
	sc.out++
	sc.lastAt = at
	sc.window.take(d)
	return sc.sent, true
}

// throttled learns from a global throttle of the scope's departure seq (0:
// not counted) whose wait ends in [lo, end] (see learnedWindow.throttledIn).
func (sc *scopeState) throttled(lo, end int64, seq uint64) {
	sc.activate()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.counting()
	sc.globalSeen = true
	if seq != 0 {
		sc.out = max(sc.out-1, 0)
	}
	sc.window.throttledIn(lo, end, seq, sc.sent)
	sc.window.answered(seq)
	sc.learning.Store(sc.window.learning())
}

// answered notes an answer, not a global throttle, to the scope's
// departure seq, that took rtt (0: no answer came), at now.
func (sc *scopeState) answered(seq uint64, rtt, now int64) {
	if seq == 0 {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.counting()
	sc.out = max(sc.out-1, 0)
	if rtt > 0 {
		sc.answerAt = now
		sc.through++
		if sc.rtt == 0 {
			sc.rtt, sc.rttVar = rtt, rtt/2
		}
		sc.rttVar += (abs64(rtt-sc.rtt) - sc.rttVar) / 4
		sc.rtt += (rtt - sc.rtt) / 8
	}
	sc.window.answered(seq)
	sc.learning.Store(sc.window.learning())
}

// holdFor returns how long after the last departure a key held while the
// window is learned looks again: the answer it waits for is due after
// about an answer's time, and may come to another key of the scope. As
// TCP's retransmission timeout does, the wait allows four times the
// answers' deviation, on top of twice their time: the answers timed are
// those that came, the quicker ones first, and with 20-70 ms flights the
// average read 33 ms, a deviation of 5: a wait of 1.5 or 2 times that let
// a second request into the window the first was to name (one run in 15,
// route keys, a global window of 7).
func (sc *scopeState) holdFor() int64 {
	return min(max(2*sc.rtt+4*sc.rttVar, int64(time.Millisecond)), int64(probeWait))
}

// rampHold is how long after the last departure a key held by the ramp
// looks again: holdFor, or, before any answer was timed, 10 ms.
func (sc *scopeState) rampHold() int64 {
	if sc.rtt == 0 {
		return int64(10 * time.Millisecond)
	}
	return sc.holdFor()
}

// idle reports whether the scope holds nothing a new one would not learn
// again. A window still being learned holds nothing either once its last
// throttle is long past (see learnedWindow.stale): otherwise a token that
// met its global limit twice, and never since, would keep every key of
// it, idle or not, for as long as the Transport lives.
func (sc *scopeState) idle(now int64) bool {
	if sc.pauseUntil.Load() > now {
		return false
	}
	if !sc.learning.Load() {
		return true
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.window.stale(now)
}

// credential returns a hash of the credential req carries, for its scope;
// 0 for none.
func credential(seed maphash.Seed, req *http.Request) uint64 {
	v := req.Header.Get("Authorization")
	if v == "" {
		v = req.Header.Get("X-Api-Key")
	}
	if v == "" {
		return 0
	}
	return maphash.String(seed, v) | 1
}

// scope returns the scope of credential cred on h, counting a reference.
func (h *hostState) scope(cred uint64) *scopeState {
	h.mu.Lock()
	defer h.mu.Unlock()
	sc := h.scope1
	if sc == nil || sc.cred != cred {
		sc = h.scopes[cred]
	}
	if sc == nil {
		if sc = h.spare; sc != nil {
			h.spare = nil
			sc.cred = cred
		} else {
			sc = &scopeState{cred: cred}
		}
		if h.scope1 == nil {
			h.scope1 = sc
		} else {
			if h.scopes == nil {
				h.scopes = make(map[uint64]*scopeState)
			}
			h.scopes[cred] = sc
		}
	}
	sc.refs++
	return sc
}

// putScope drops a reference to sc, a scope of h.
func (h *hostState) putScope(sc *scopeState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sc.refs--; sc.refs != 0 {
		return
	}
	switch {
	case h.scope1 == sc:
		h.scope1 = nil
	case h.scopes[sc.cred] == sc:
		delete(h.scopes, sc.cred)
	}
}

// scopePaused notes that some scope of e is paused until until: keys look
// at their scope's pause only while some scope's pause may last.
func (e *keyEnv) scopePaused(until int64) {
	for {
		cur := e.scopePauses.Load()
		if until <= cur || e.scopePauses.CompareAndSwap(cur, until) {
			return
		}
	}
}
