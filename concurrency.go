package headway

import "time"

// A server may limit the requests of a key it works on at once rather
// than (or besides) their rate: Stripe's concurrency limiter, GitHub's cap
// on concurrent requests. Paced as a rate, such a server is served at
// about half what it allows, since the pace that throttles it depends on
// how long its answers take. A key with no limits configured, whose server
// says nothing but 429 (see keyState.bare), learns such a cap from its
// throttles:
//
//   - A bare throttle is measured (concMeasure): the requests of the key
//     the server was at work on when it refused it are those sent no
//     later than the refused one (or so soon after it that they may have
//     reached the server first: groupSpan) and answered, not refused,
//     after it left. A concurrency limit refuses with the same count each
//     time; a rate limit, with whatever happened to be out.
//   - Two measures in a row that agree to one, and that no recent answer
//     contradicts (one that came back with more of the key's requests at
//     work beside it than one over: atWork), make a cap of the smaller,
//     if it is 2 or more (a key that sends one request at a time to a
//     rate limit looks like one held to 1):
//     the key holds its requests out to it (hasSlot). The pace learned
//     from the throttles so far is put aside: it measured the cap, if
//     the cap holds.
//   - Held to its cap, the key is not refused by the cap: its throttles
//     are held for their measure to say whose they are. One that found
//     the cap at work under a raise (below) confirms the cap. One that
//     found less is a rate's: the pace put aside comes back and takes
//     its wait in (it cuts nothing: the cap sent it, not the pace), and
//     a confirmed cap comes down to the measure. One that found none
//     drops the cap, and after concMisses such, the key learns none
//     again; one under a cap not confirmed, at once.
//     Held throttles count as no strikes.
//   - A cap that held requests back is raised by one after confirmRaise,
//     then after twice as long with each confirmation, up to maxRaise,
//     and raised on at once while raises go through: to find a limit the
//     server raised, or a share of it that another client freed. A
//     confirmation costs a throttle, and the wait it names if any, and
//     forgets the pace put aside.
type concLimit struct {
	cap    uint64 // the requests the key holds out to; 0: none learned
	cand   uint64 // the last measure, to be agreed with; 0: none
	misses int    // measures of none at work
	// atWork is the most requests of the key the server was seen at
	// work on at once, an answered one included, within atWorkSpan
	// (atWorkAt, when it was last seen): a cap under it, less one for an
	// answer on its way back, is refuted.
	atWork    uint64
	atWorkAt  int64
	confirmed bool                     // a throttle of the cap's confirmed it
	raised    bool                     // cap was raised by one, and not yet confirmed
	changedAt int64                    // when cap last changed
	changedN  uint64                   // departures sent before it changed
	every     int64                    // how long a confirmed cap holds before it is raised
	held      uint64                   // answers that freed a slot a waiter wanted since cap changed
	m         [concFlights]concMeasure // the throttles being measured, of a flight each
	// saved is the key's pace, learned from the throttles before the cap
	// came, while the cap is not confirmed.
	saved *savedPace
	// hist holds the last answers that were not throttles: when each
	// left and came back (next, the slot to write), for a throttle's
	// measure to count those that came back before it did.
	hist [concHist]struct{ sent, at int64 }
	next int
	lat  int64 // how long answers that were not throttles took, smoothed
	// lastAt is when the last bare throttle came.
	lastAt int64
}

// measuring reports whether a throttle of c is being measured.
func (c *concLimit) measuring() bool {
	for i := range c.m {
		if c.m[i].open {
			return true
		}
	}
	return false
}

type savedPace struct {
	a aimd
	b bucket
}

// concMeasure counts the requests the server was at work on when it
// refused one: those sent no later than it (to groupSpan) and answered
// after it left.
type concMeasure struct {
	open  bool
	sent  int64 // when the refused request left
	at    int64 // when its refusal came back
	until int64 // when the count is taken: answers by then are in
	count uint64
	// held: the throttle was held for the measure to classify (the key
	// has a cap): b is it, and capAt the cap it left under.
	held  bool
	b     bareThrottle
	capAt uint64
}

const (
	confirmRaise = 10 * time.Second
	maxRaise     = 5 * time.Minute
	concMisses   = 3
	concHist     = 64
	concFlights  = 4
	atWorkSpan   = 30 * time.Second
	concIdle     = 30 * time.Second
)

// departed notes, under k.mu, how many requests of k are out as dep
// leaves, dep included, for a key that may learn a cap (no configured
// limits).
func (k *keyState) departed(dep *departure) {
	if !k.learnsCap() {
		return
	}
	u := k.unseenN()
	dep.flight = uint32(min(u, 1<<31))
	dep.okAt = k.answeredOK(u)
}

// learnsCap reports whether k may learn a cap: it has no configured
// limits, and no fleet paces it. Both are set when k is made.
func (k *keyState) learnsCap() bool { return len(k.pacer.buckets) == 0 && !k.fleetPaced }

// answeredOK returns, under k.mu, how many of k's departures came back no
// throttle, with u unseen: departures less those out, less throttles (and
// the few that failed or were given up, counted as answers).
func (k *keyState) answeredOK(u uint64) uint32 {
	return uint32(k.sent-u) - k.thrN
}

// concThrottle takes in, under k.mu at now, the bare throttle b of dep,
// and reports whether the key's cap takes it: then the key's pace does
// not, now (see concLimit).
func (k *keyState) concThrottle(now int64, dep departure, b bareThrottle) bool {
	c := k.conc
	if c == nil {
		c = &concLimit{every: int64(confirmRaise)}
		k.conc = c
	}
	if c.misses >= concMisses {
		return false
	}
	fresh := !k.capping.Load() // no answer kept since the last throttles (see concAnswered)
	c.lastAt = now
	if c.cap > 0 && dep.seq <= c.changedN {
		// It left before the cap changed, not held to it: the cap's if
		// the cap holds it out now, and no measure of the cap.
		return uint64(dep.flight) > c.cap
	}
	open := -1 // the measure of the latest flight
	for i := range c.m {
		if c.m[i].open && (open < 0 || c.m[i].at > c.m[open].at) {
			open = i
		}
	}
	if open >= 0 && dep.sent <= c.m[open].at {
		return c.m[open].held // of the flight being measured
	}
	slot := -1
	for i := range c.m {
		if !c.m[i].open {
			slot = i
			break
		}
	}
	if slot < 0 {
		return false // as many flights are measured as may be
	}
	lat := c.lat
	if lat == 0 {
		lat = int64(time.Second)
	}
	m := &c.m[slot]
	*m = concMeasure{open: true, sent: dep.sent, at: now, until: now + 2*lat}
	if fresh {
		// No answer was kept: those that came back since it left (of its
		// flight, as a rule) were at work when it came.
		m.count = uint64(k.answeredOK(k.unseenN()) - dep.okAt)
	}
	m.count += c.answeredSince(dep.sent, dep.sent+groupSpan) // at work when it came, answered before its refusal came back
	if c.cap > 0 {
		m.held, m.b, m.capAt = true, b, c.cap
		if c.raised {
			// Back under the raise at once, till the measure says whose
			// throttle it was.
			c.cap--
			m.capAt = c.cap
		}
	}
	k.capping.Store(true)
	return m.held
}

// concSlot reports, under k.mu, whether a learned cap lets one more
// request of k out.
func (k *keyState) concSlot() bool {
	return k.conc == nil || k.conc.cap == 0 || k.unseenN() < k.conc.cap
}

// concAnswered takes in, under k.mu at now, the answer to dep (ok: not a
// throttle): a measure's count, and a cap's slot freed. A key with no cap
// and no measure under way stops keeping its answers concIdle after its
// last throttle: its answers take no lock again until the next one.
func (k *keyState) concAnswered(now int64, dep *departure, ok bool) {
	c := k.conc
	defer func() {
		if c.cap == 0 && now-c.lastAt > int64(concIdle) && !c.measuring() {
			k.capping.Store(false)
		}
	}()
	if ok {
		// What came back since it left, having left no later, was at work
		// with it (a lower bound: more may be on its way).
		n := 1 + c.answeredSince(dep.sent, dep.sent)
		if n >= c.atWork || now-c.atWorkAt > int64(atWorkSpan) {
			c.atWork, c.atWorkAt = n, now
		}
		if d := now - dep.sent; c.lat == 0 {
			c.lat = d
		} else {
			c.lat += (d - c.lat) / 8
		}
		c.hist[c.next] = struct{ sent, at int64 }{dep.sent, now}
		c.next = (c.next + 1) % concHist
	}
	for i := range c.m {
		m := &c.m[i]
		if !m.open {
			continue
		}
		if ok && dep.sent <= m.sent+groupSpan {
			m.count++
		}
		if now >= m.until {
			m.open = false
			k.concMeasured(now, *m)
		}
	}
	if c.cap == 0 || k.queue.head == nil || !ok || k.unseenN()+1 < c.cap || k.pacer.pauseUntil > now {
		return
	}
	// The answer freed a slot that a waiter wanted: from here the pacer's
	// clock runs.
	k.freedAt = now
	c.held++
	if c.held >= c.cap && (c.raised || now-c.changedAt >= c.every) {
		// Due, or a raise that a cap's worth of answers went through:
		// one more.
		c.setCap(c.cap+1, true, now, k.sent)
	}
}

// setCap sets c's cap to n at now, sent departures in, raised or not.
func (c *concLimit) setCap(n uint64, raised bool, now int64, sent uint64) {
	c.cap, c.raised, c.changedAt, c.changedN, c.held = n, raised, now, sent, 0
}

// answeredSince counts the answers kept that came back after sent and had
// left no later than upTo.
func (c *concLimit) answeredSince(sent, upTo int64) uint64 {
	var n uint64
	for _, h := range c.hist {
		if h.at > sent && h.sent <= upTo {
			n++
		}
	}
	return n
}

// restorePace gives k back the pace put aside while a cap was tried, if
// any, and reports whether there was one.
func (k *keyState) restorePace() bool {
	c := k.conc
	if c.saved == nil {
		return false
	}
	k.aimd, k.aimdB, c.saved = c.saved.a, c.saved.b, nil
	return true
}

// concMeasured takes in, under k.mu at now, the measure m of a throttle.
func (k *keyState) concMeasured(now int64, m concMeasure) {
	c := k.conc
	n := m.count
	switch {
	case m.held && n >= m.capAt && (c.raised || c.confirmed):
		// The cap's throttle: what a raise was to find, or a confirmed
		// cap that a request let out as others left found full.
		if c.raised {
			c.every = min(2*c.every, int64(maxRaise))
			c.confirmed, c.saved = true, nil
		}
		c.setCap(m.capAt, false, now, k.sent)
		return
	case m.held:
		// A rate's throttle: the pace put aside is back, and takes in its
		// wait. A cap not confirmed yet was a rate's all along. What left
		// under the cap left at no pace: its throttle says the cap was
		// too many, not that the pace is too fast, and cuts nothing (a
		// bucket of 50/s burst 5 over answers of 100 ms, taken for a cap
		// of 5: cut from 42/s to 10/s by the throttle of the cap's first
		// flight, which the cycle since the pace's wait was measured by,
		// 0.346 of the least time with Retry-After, 0.715 now).
		m.b.unpaced = k.restorePace()
		k.cut(m.b)
		if !c.confirmed {
			// Held to a cap that a concurrency limit would not refuse
			// under, the key was refused: no such limit, for good.
			c.misses, n = concMisses-1, 0
		}
	}
	switch {
	case !m.held && c.cap > 0 && m.at < c.changedAt:
		// Of a flight before the cap changed, and measured since: what
		// it says is in the cap already.
	case n == 0:
		c.misses++
		c.cap, c.cand, c.raised, c.confirmed = 0, 0, false, false
		k.restorePace()
	case c.cap > 0:
		c.setCap(min(n, c.cap), false, now, k.sent)
	case n+1 < c.atWork:
		// An answer came back beside more of the key's requests at work
		// than it found: no cap of n.
		c.cand = 0
	case min(n, c.cand) >= 2 && n+1 >= c.cand && n <= c.cand+1 && min(n, c.cand)+1 >= c.atWork:
		// The pace learned from the throttles so far measured the cap,
		// if it holds: put aside while it is tried.
		c.setCap(min(n, c.cand), false, now, k.sent)
		c.cand = 0
		c.saved = &savedPace{k.aimd, k.aimdB}
		k.aimd, k.aimdB = aimd{}, bucket{}
		k.rare |= rareCapped // before dispatch, which holds the queue to it
	default:
		c.cand = n
	}
	k.noteLearning()
	k.capping.Store(c.misses < concMisses)
}

// concFreed takes in an answer to dep (ok: not a throttle) of a key that
// measures or holds a cap, and lets its queue go on.
func (k *keyState) concFreed(dep *departure, ok bool) {
	now := k.env.now()
	k.mu.Lock()
	if c := k.conc; c != nil {
		k.concAnswered(now, dep, ok)
		if k.queue.head != nil && (c.cap > 0 || k.rare&rareCapped != 0 || c.saved != nil) {
			k.dispatch(now) // a slot of the cap, or a cap just dropped
		}
	}
	k.mu.Unlock()
}
