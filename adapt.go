package headway

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
)

// What the server says shapes the pace of a key through three pieces, each
// pure (time is an argument, in the pacer's nanoseconds) and kept under the
// key's lock:
//
//   - serverModel mirrors the server's own bucket as its responses describe
//     it: the requests it says remain, the rate at which they come back
//     (stated by a policy, or measured between responses) and when a
//     window resets. It lets requests go while the mirror holds a request
//     and holds them back when it is empty: quota the server says is ours
//     is spent at once, then the key waits for the refill or the reset.
//   - aimd is the fallback for servers that say nothing but 429: cut the
//     rate on a throttle, grow it back along a cubic curve on success, as
//     the AWS SDKs' adaptive retry mode does.
//   - pauses (in the pacer, and per host for global scopes) hold every
//     request of the key until a stated wait is over.

// serverModel is the client's picture of the server's quota for one key.
//
// It is a bucket of tokens that refills at rate up to cap, drained by every
// departure. Each departure records what the model predicted would be left
// right after it; the response to that departure states what the server had
// left right after it, and the difference (the innovation) corrects the
// model and every prediction made since. Comparing each response with the
// prediction for its own request, not with the present, is what makes the
// sync exact with requests in flight and responses that come back in
// another order than the server counted them.
//
// The refill rate comes, in order of trust, from a stated policy (Limit per
// Period), from bounds that stated resets put on it (a bucket that is
// Remaining short of cap is full again after Reset, so the rate lies
// between (cap-Remaining-1)/Reset and (cap-Remaining)/(Reset-resolution)),
// and from the innovations themselves: a model that refills too slowly is
// corrected upwards, one that refills too fast downwards, and their sum
// over a span, divided by the span, is the rate's error.
//
// A server that counts fixed windows gives nothing back until a boundary,
// then all at once. Its answers contradict every refill rate (a reset that
// stays put while the quota drains says the rate is high; the full quota
// just after the boundary says it is low), so bounds that contradict each
// other even at a second's resolution make the model a window: it spends
// what is left, then waits for the reset, and for each boundary after it a
// window length on (measured between the resets stated). In each window
// it holds at least the least remaining its answers stated, less the
// requests still in flight (see sync), and answers counted in a window
// that has ended correct nothing. Quota that comes back well before the
// reset makes it a bucket again.
//
// Requests in flight are spent the moment they leave; requests that leave
// close together (groupSpan) are compared with the level after all of them,
// since the server may count them in any order. What errors remain (a
// throttle, or clearly fewer left than predicted) grow a margin of requests
// kept back, which a run of right predictions shrinks again.
type serverModel struct {
	known bool // a response has stated a remaining quota
	// early: quota came back well before the reset stated (a request that
	// left after an answer stated leastLeft was told more left, the reset
	// no later): the resets do not say when the server refills
	// (Atlassian's, rounded up to the minute, of a bucket that refills in
	// half a second), no window ends at them, and the bounds they put on
	// the rate are wrong. The rate is measured from what the answers state
	// is left.
	early bool
	// trickles: a request that left with room the model had refilled by
	// its rate, after an answer that stated none left and before the
	// reset it stated, was admitted: the server refills before its
	// resets (see trickledPastEmpty).
	trickles bool
	// missed: a request the model trickled in was throttled, after
	// trickles or early proved that the server refills before its resets
	// (see judgeTrickle); cleared by the next answer that states a quota.
	missed bool
	// sinceReset is the departures since the answer that named resetAt
	// (left before it): the server may count them after it.
	sinceReset int32

	tokens  float64 // requests left at time at, less those sent since
	at      int64
	cap     float64 // the most the bucket has been seen to hold
	resetAt int64   // when an emptied window refills to cap, if rate is 0

	rate   float64 // requests per nanosecond coming back; 0 if unknown
	lo, hi float64 // bounds on rate from stated resets; hi 0: none
	coarse bool    // stated resets proved coarser than they look
	window bool    // the server resets fixed windows: nothing trickles back before resetAt
	// secondReset reports that the answer being observed stated its reset
	// to the second (set by the key before observe).
	secondReset bool
	held        bool // the model held a request back (set by the key)
	spread      bool // spread what remains evenly instead of spending it at once
	rateStated  bool // rate comes from a policy, not from measurement
	// msReset: an answer stated its reset to the millisecond and not in
	// whole seconds, so the key's resets are precise even when one
	// happens to be a whole number of seconds (a request counted right at
	// a boundary of windows aligned to whole seconds).
	msReset bool
	// gapSet: gap was measured, by an answer stated to the millisecond; a
	// window first seen in an answer stated to the second (one counted at
	// its window's start says 1.000) has gap 0 until one comes.
	gapSet bool

	resetSeen int64   // the latest reset instant stated so far
	seenLeft  float64 // the remaining count stated with resetSeen
	seenAt    int64   // when the answer that stated resetSeen came
	leastLeft float32 // the least remaining stated since resetSeen moved
	// gap: with window, how long before resetAt the window may end. An
	// answer's reset was stated between its request's departure and its
	// arrival, so the boundary lies between the two plus the reset: what
	// is left of a window is not spent after the earlier (the server may
	// count it in the next window), nor the next window's before the
	// later. Stated to the millisecond only; at most maxGap.
	gap    int32
	period int64   // with window: the length of a window, once seen; 0 if not
	winMin float64 // with window: the least remaining stated in the present window
	turnAt int64   // with window: when the present window's first answered departure left
	// offset is the estimate of the server's clock less ours that the
	// reset of the answer being observed was measured with (set by the
	// key before observe), and seenOffset the one resetSeen was: a
	// window's length is measured on the server's clock, which the
	// estimate moves by up to a second while the Dates narrow it.
	offset, seenOffset int64

	// margin is the requests kept back beyond the one reserve, for the
	// errors of the model: it grows by one with each prediction the
	// server proved wrong (a throttle, or fewer left than predicted for a
	// request) and shrinks by one after marginDecay right ones.
	margin float64
	right  int32 // predictions proved right since margin last moved
	// leastSent is the last departure (its seq, mod 2^32) when the answer
	// that stated leastLeft came: a request sent after it was counted
	// after that answer's.
	leastSent uint32

	spanAt    int64   // start of the span the innovations are summed over
	spanInnov float64 // their sum

	admitted uint64 // responses received that the server admitted
	answered uint64 // responses received

	lastTake int64 // when the last departure left
	nextAt   int64 // with spread: the next departure, at the earliest

	// flightMin is the shortest time an answer has taken to come back,
	// from its departure; 0: none yet.
	flightMin int64

	// deps, last: every departure reads it (see keyState.takePlain), and
	// a key keeps it on one cache line with its window's taken.
	deps *[depRing]depRecord // the latest departures, by seq % depRing; nil until needed (see track)
}

// track makes the model remember its departures from now on. A key whose
// server says nothing, paced by its configured limits alone, never pays
// for the memory.
func (m *serverModel) track() {
	if m.deps == nil {
		m.deps = new([depRing]depRecord)
	}
}

// ring returns the departures remembered, none before track.
func (m *serverModel) ring() []depRecord {
	if m.deps == nil {
		return nil
	}
	return m.deps[:]
}

// depRecord is what the model predicted for one departure.
type depRecord struct {
	seq  uint64  // the departure's number; 0 for an empty slot
	at   int64   // when it left
	pred float64 // tokens the model expected right after it
	left float64 // with stated: the quota left after it, as its answer stated
	ok   bool    // pred is known: the model was synced when it left
	done bool    // its answer came
	// stated: its answer stated left.
	stated bool
	// held: a later departure's answer came first, and the news it
	// brought was taken in less one for this one, which the server may
	// have counted after it (see observe).
	held bool
}

// depRing is how many departures the model remembers. A response to an
// older one (more than depRing requests in flight) corrects nothing.
const depRing = 64

// groupSpan is how far apart two departures may be and still reach the
// server in either order: requests that leave within it are counted in
// an order the client cannot know (connections, scheduling), so each is
// compared with the level after all of them.
const groupSpan = int64(10 * time.Millisecond)

// marginDecay is the run of right predictions after which the margin
// shrinks by one request.
const marginDecay = 32

// probeGap is how long after the last departure a model that does not know
// when its quota comes back sends one request to find out.
const probeGap = int64(250 * time.Millisecond)

// rateSpan is the shortest span over which innovations re-estimate an
// unstated refill rate: remaining counts are whole numbers, so one span
// measures the rate to within about one request per span.
const rateSpan = int64(250 * time.Millisecond)

// rateQuanta is the least refill, in requests at the rate measured so
// far, over which innovations re-estimate it: a request's rounding is
// then a quarter of it at most (see remeasure).
const rateQuanta = 4

// minRate is the slowest refill the model believes in, per nanosecond (one
// request in 10,000 s); below it the server is taken to reset windows
// instead.
const minRate = 1e-13

// observe takes in what a response to departure seq said at now. sent is
// the number of departures so far.
func (m *serverModel) observe(now int64, seq, sent uint64, sig *ratelimitheader.Signal) {
	if sig.Reset > maxModelReset {
		// No window or bucket of months or centuries is one to pace by,
		// and since reset instants only move on, the model (and its key,
		// never idle before it) would be held to it for good.
		s := *sig
		s.Reset = 0
		sig = &s
	}
	if sig.Limit > 0 && sig.Period > 0 && !sig.OverMaxServerWait {
		// A stated policy: Limit requests per Period.
		m.rate, m.rateStated = float64(sig.Limit)/float64(sig.Period), true
	}
	m.answered++
	m.judgeTrickle(seq, sig.Throttled)
	if !sig.Throttled {
		m.admitted++
	}
	if !sig.HasRemaining {
		m.answeredDep(seq)
		return
	}
	if !sig.Throttled && m.punished(now) {
		m.takeWindows()
	}
	if m.secondReset && m.msReset {
		// Its other answers stated their resets to the millisecond: one
		// that is whole seconds (of the delta, or of the server's clock) is
		// a request counted at a boundary aligned to whole seconds, not a
		// reset rounded to the second.
		m.secondReset = false
	}
	left := float64(sig.Remaining)
	m.cap = max(m.cap, left+1)
	m.track()
	rec := &m.deps[seq%depRing]
	if rec.seq == seq {
		defer func() { rec.done, rec.stated, rec.left = true, true, left }()
	}
	switch {
	case !m.known:
		// The first news: what the server had left after seq, less the
		// departures since.
		m.known = true
		m.tokens, m.at = left-float64(sent-min(seq, sent)), now
		m.spanAt, m.spanInnov = now, 0
	case rec.seq != seq || !rec.ok:
		// Too old to compare with what the model expected.
	case m.window && rec.at < m.turnAt && sig.Reset > 0 && satAdd(now, int64(sig.Reset)) < m.resetSeen-m.answerResolution():
		// Sent before the present window's first answer and counted in a
		// window that has ended: what it had left says nothing of this one.
	default:
		flight := max(now-rec.at, 0)
		if m.flightMin == 0 || flight < m.flightMin {
			m.flightMin = max(flight, 1)
		}
		pred, alone := m.groupPred(rec, flight-m.flightMin)
		if sig.Throttled {
			// The server did not count a rejected request: give back the
			// token the model spent on it.
			m.correct(now, rec.at, 1)
			pred++
		}
		e := left - pred
		// What the rate is wrong by: a count of left says the level lies
		// in [left, left+1), so a prediction within it is right, and one
		// above it is wrong by its distance to left+1, not to left (the
		// level is still corrected to left, which is safe). Taken to left,
		// a level of 0.998 stated as 0 was an error of a whole request,
		// and a bucket of two a second, which the model spends only when
		// full again, was paced at half its rate.
		fine := false
		if l := m.throttledLevel(left, sig); l > left {
			e, fine = l-pred, true
		}
		rateE := e
		if e < 0 && !fine {
			rateE = min(e+1, 0)
		}
		m.judge(sig.Throttled && rec.pred >= 0, e)
		// A request that left with others may have been counted before
		// them: its answer can be above the group's prediction (the level
		// after all of them) without the model being wrong. So can one
		// that overtook requests sent before it and not yet answered (a
		// slow connection, a goroutine scheduled late): the server may
		// count them after it. Only what is above both is news.
		if e > 0 {
			if lmin, later := m.statedAfter(rec); later {
				// A later departure's answer came first and was taken in,
				// less one for each older one still out (this one among
				// them). This one says more only if the server counted it
				// before the later ones (it left more than they did), and
				// then only the one held back for it. Taken whole, the
				// answer to a request sent 16 ms before another, 13 ms
				// slower to come back, lifted a Discord bucket by three
				// when one was left, and three requests went into a
				// window that had room for one (TestJitteredAnswersNameOneWindow).
				if rec.held && left > lmin {
					e = min(e, 1)
				} else {
					e = 0
				}
			} else {
				e = max(e-m.holdBefore(rec), 0)
			}
		}
		if e < 0 || (e > 0 && alone) {
			m.correct(now, rec.at, e)
			if !m.rateStated {
				m.spanInnov += rateE
			}
		}
		if m.window && e > 0 && alone && !sig.Throttled && rec.at < m.resetSeen-int64(time.Second) &&
			(m.period == 0 || rec.at >= m.resetSeen-m.period) {
			// Quota came back well before the window's end: a bucket after
			// all. Measure it again.
			m.window, m.coarse, m.lo, m.hi = false, true, 0, 0
		}
	}
	if sig.Reset > 0 && !m.secondReset && sig.Reset%time.Second != 0 {
		m.msReset = true
	}
	if sig.Reset > 0 && m.resetSeen > 0 && !m.early && rec.seq == seq && int32(uint32(seq)-m.leastSent) > 0 &&
		left > float64(m.leastLeft)+1 && satAdd(now, int64(sig.Reset)) <= m.resetSeen+int64(time.Second) &&
		now < m.resetSeen-int64(time.Second) {
		// Counted after the least answer, more left, a reset no later, and
		// well before it.
		m.early, m.window, m.lo, m.hi = true, false, 0, 0
	}
	if sig.Reset > 0 && !m.window && !m.early {
		flight := int64(0) // how long before now the server may have stated it
		if rec.seq == seq {
			flight = min(max(now-rec.at, 0), maxGap)
		}
		m.stays(now, flight, left, sig.Reset)
	}
	if sig.Reset > 0 && !m.window && !m.early {
		m.bound(left, sig.Reset)
	}
	if !m.rateStated && !m.window {
		m.remeasure(now)
	}
	if m.window && sig.Throttled && sig.Reset > 0 && rec.seq == seq && m.turnedEmpty(now, rec, sig.Reset) {
		m.slides()
	}
	if m.rate < minRate || m.window {
		m.rate = 0
	}
	if sig.Reset > 0 {
		// Reset instants only move on: a bucket's fills later with every
		// request, and a window's answers that come back late name a
		// boundary already passed.
		at := satAdd(now, int64(sig.Reset))
		gap := int64(-1) // how long before at the boundary may be, if known
		if rec.seq == seq && !m.secondReset {
			gap = min(max(now-rec.at, 0), maxGap)
		}
		if at > m.resetSeen {
			// The instant named lies between the departure's plus the reset
			// and at: a later window only if even the earlier is past the
			// end seen. (Answers of one window that came back slower name
			// later instants by their flight's jitter, 50-100 ms on a
			// loaded or distant link: taken for turns, they measured
			// periods of a few ms, and the model refilled every few ms.)
			lo := at
			if gap >= 0 {
				lo = at - gap
			}
			turned := m.window && m.resetSeen > 0 && lo-m.resetSeen > m.answerResolution()
			if turned || m.resetSeen == 0 {
				m.gap, m.gapSet = 0, gap >= 0
				if gap >= 0 {
					m.gap = int32(gap)
				}
			} else if gap >= 0 && !m.gapSet {
				m.gap, m.gapSet = int32(gap), true
			} else if gap >= 0 {
				// The same window, stated later: the boundary is no
				// earlier than this answer says.
				m.gap = int32(max(min(int64(m.gap)+at-m.resetSeen, gap), 0))
			}
			if turned {
				// The next window's end, on the server's clock; or, if no
				// answer came in the windows between (demand every other
				// window), a multiple of the length known.
				m.period = m.periodFrom((at + m.offset) - (m.resetSeen + m.seenOffset))
			}
			m.resetSeen, m.resetAt, m.seenOffset = at, at, m.offset
			m.seenLeft, m.seenAt = left, now
			m.leastLeft, m.leastSent = float32(left), uint32(sent)
			m.sinceReset = 0
			if turned {
				m.winMin, m.turnAt = math.Inf(1), now
				if rec.seq == seq {
					m.turnAt = rec.at
				}
			}
		}
		if left < float64(m.leastLeft) {
			m.leastLeft, m.leastSent = float32(left), uint32(sent)
		}
		if gap >= 0 && at <= m.resetSeen && m.names(at, gap) {
			// An answer of the present window that left later.
			g := m.resetSeen - (at - gap)
			if m.gapSet {
				g = min(int64(m.gap), g)
			}
			m.gap, m.gapSet = int32(min(max(g, 0), maxGap)), true
		}
		if m.window && !sig.Throttled && m.names(at, gap) {
			m.winMin = min(m.winMin, left)
			m.sync(now, seq)
		}
	}
}

// judgeTrickle takes in whether departure seq was throttled, if it left
// with room the model had trickled in before a stated reset (see
// trickledPastEmpty). If it was, that quota was not there: the server
// resets windows (fixed or sliding), and nothing comes back before its
// resets. (Read as a bucket, an IETF window of 5 per 2 s that said
// r=0;t=2 was spent again 0.8 s later, and a server that blocks for 30 s
// on a violation blocked the key every cycle.) Unless such a request was
// admitted before: then the server refills before its resets (a bucket
// whose resets state its time to full, rounded up to the second), and
// the throttle is the model's error, which its margin learns from.
//
// A server that refills before its resets may still punish a request its
// model trickled in too soon: a sliding window, whose quota comes back
// request by request, over which a bucket's rate is an average, blocked a
// key for 30 s on each such throttle (4 blocks for 40 requests). Such a
// throttle is remembered (missed); if the key's next admitted answer
// comes only after a block (see punished), the resets are taken for
// windows all the same: spending the quota at each reset costs a little
// of the rate, a block costs many windows.
func (m *serverModel) judgeTrickle(seq uint64, throttled bool) {
	if !m.trickledPastEmpty(seq) {
		return
	}
	switch {
	case !throttled:
		m.trickles = true
	case m.trickles || m.early:
		m.missed = true
	default:
		m.takeWindows()
	}
}

// takeWindows makes the model one of windows (fixed or sliding), whose
// quota comes back at its resets and not before: no rate, and none of the
// bounds that resets read as a bucket's put on one.
func (m *serverModel) takeWindows() {
	m.window, m.early, m.lo, m.hi, m.rate = true, false, 0, 0, 0
}

// turnedEmpty reports whether rec, throttled, was counted in the present
// window (its reset, after now, names resetSeen) before half the window's
// quota had left since it turned (turnAt): a fixed window holds its whole
// quota from its turn, so the reset stated says when the server restarts
// its count, not when its quota comes back (a sliding window counter's end
// of window, as Upstash states it: the previous window's count still
// weighs after it).
func (m *serverModel) turnedEmpty(now int64, rec *depRecord, reset time.Duration) bool {
	if m.turnAt <= 0 || rec.at < m.turnAt || m.cap < 2 {
		return false
	}
	if abs64(satAdd(now, int64(reset))-m.resetSeen) > m.answerResolution() {
		return false // another window's
	}
	sent := 0
	for i := range m.deps {
		if d := &m.deps[i]; d.seq != 0 && d.seq < rec.seq && d.at >= m.turnAt {
			sent++
		}
	}
	return float64(sent) < m.cap/2
}

// slides makes a window's model a sliding window's: quota comes back
// before the resets stated (see early), as the requests counted age out.
func (m *serverModel) slides() {
	m.window, m.early, m.coarse, m.lo, m.hi = false, true, true, 0, 0
}

// punished reports, at now, the first answer that states a quota after a
// throttle the model missed (see judgeTrickle), whether that throttle
// began a block: nothing was admitted for much longer than the reset the
// last answer before it stated (four times it, and five seconds more).
func (m *serverModel) punished(now int64) bool {
	if !m.missed {
		return false
	}
	m.missed = false
	stated := max(m.resetSeen-m.seenAt, 0)
	return now-m.seenAt > 4*stated+int64(5*time.Second)
}

// trickledPastEmpty reports whether departure seq left with
// room the model had refilled by its rate after an answer that stated
// none left (the least since the latest reset stated), and before that
// reset. Before it, a bucket at that rate would have held the room, so a
// throttle proves the model wrong whatever the reset is rounded by: a
// window whose reset was rounded up had not turned, and one rounded down
// would have been full.
func (m *serverModel) trickledPastEmpty(seq uint64) bool {
	if m.window || m.rate <= 0 || m.deps == nil || m.resetSeen <= 0 || m.leastLeft >= 1 {
		return false
	}
	rec := &m.deps[seq%depRing]
	if rec.seq != seq || !rec.ok || rec.pred < 0 || int32(uint32(seq)-m.leastSent) <= 0 {
		return false
	}
	return rec.at < m.resetSeen
}

// names reports whether an answer that names the reset at, which lies up
// to gap before it (its flight; -1: unknown), names the end of the present
// window, resetSeen, which lies up to m.gap before it. Compared at the
// arrivals alone, to within the resolution of an answer, answers of one
// window whose flights differ by 20 ms were taken for another window's,
// and the least remaining of the window (which sync lifts the model to)
// missed the lowest: the model let a sixth request into a window of 5.
func (m *serverModel) names(at, gap int64) bool {
	if gap < 0 || !m.gapSet {
		return abs64(at-m.resetSeen) <= m.answerResolution()
	}
	return at-gap <= m.resetSeen+stillTolerance && at+stillTolerance >= m.resetSeen-int64(m.gap)
}

// sync lifts a window's model to what the answers of the present window
// prove is left: the least remaining one of them stated, less the
// departures still unanswered (but seq's), which the server may count
// after it. Exact once every answer is in; only up, since the answers
// correct the model down as for any server. A model that took the window
// for a bucket when the boundary passed would otherwise keep its low
// level (an answer above its prediction lifts it only when no earlier
// request is in flight: a bucket's answers overtake each other) and leave
// the window's quota unused until the next boundary.
func (m *serverModel) sync(now int64, seq uint64) {
	others, oldest := 0, now
	for i := range m.ring() {
		if r := &m.deps[i]; r.seq != 0 && r.seq != seq && r.ok && !r.done {
			others++
			oldest = min(oldest, r.at)
		}
	}
	target := m.winMin - float64(others)
	if l := m.level(max(now, m.at)); target > l {
		m.correct(now, oldest, target-l)
	}
}

// stillTolerance is how far two statements of one reset instant may be
// apart, stated to the millisecond: the time each answer spent in flight
// differs.
const stillTolerance = int64(10 * time.Millisecond)

// stays notes whether a reset stated to a millisecond stayed put while the
// quota drained: a bucket's moves later with every request it counts (by
// 1/rate), a window's stays where its boundary is. Two such answers in a
// row make the model a window. (A bucket too fast to tell, 100 a second or
// more, is then paced as a window that resets when the bucket is full
// again: its burst at once, then a wait for the refill, much the same
// rate.)
//
// The answer is compared with the one that stated the latest reset, not
// with the last to come: answers to requests in flight together come back
// in any order, and other clients spend the same quota, so the last to
// come may have been counted much earlier, with more left and an earlier
// reset. Two answers that state the same reset and the same remaining say
// nothing drained between them, whatever came in between.
//
// Each instant is known to lie between its request's departure plus the
// reset and its answer's arrival plus the reset (flight before now, the
// seen one gap before it): two that may be the same are taken for one.
// Read at the arrivals alone, answers whose flights differ by 20 ms named
// instants 20 ms apart, and the windows of the Discord routes were taken
// for buckets refilling 5 a second, which let 6 or 7 into a window.
func (m *serverModel) stays(now, flight int64, left float64, reset time.Duration) {
	if m.secondReset || m.wholeSeconds(reset) || m.resetSeen == 0 || left == m.seenLeft {
		return
	}
	if left > m.seenLeft && now-m.seenAt > stillTolerance {
		return // a bucket that refilled: its reset stays put too
	}
	seenLo := m.resetSeen
	if m.gapSet {
		seenLo -= int64(m.gap)
	}
	if at := satAdd(now, int64(reset)); at-flight <= m.resetSeen+stillTolerance && seenLo <= at+stillTolerance {
		m.takeWindows()
	}
}

// throttledLevel returns the level a throttle that stated left and named
// a wait shows the server held, to within a fraction of a request: a
// bucket refilling at the rate measured that admits the next request
// after the wait held 1-rate·wait, which lies in [left, left+1) as the
// count says. Read as left, its floor, every throttle of a model a little
// too fast was an error of a whole request: with a bucket of one, whose
// answers never show a model too slow, two throttles halved the rate
// (1.3/s to 0.66/s against 1/s). A wait longer than the refill (a
// penalty, a reset to a full bucket) or a window's says no more than
// left does.
func (m *serverModel) throttledLevel(left float64, sig *ratelimitheader.Signal) float64 {
	if !sig.Throttled || !sig.HasWait || m.rate <= 0 || m.window {
		return left
	}
	return min(max(1-m.rate*float64(sig.Wait), left), math.Nextafter(left+1, left))
}

// groupPred returns the level the model predicted after rec's departure and
// every other that left within groupSpan of it, which the server may have
// counted before it, and whether there was no such other.
func (m *serverModel) groupPred(rec *depRecord, late int64) (pred float64, alone bool) {
	pred, alone = rec.pred, true
	for i := range m.ring() {
		if r := &m.deps[i]; r.seq != 0 && r != rec && r.ok && r.at >= rec.at-groupSpan && r.at <= rec.at+groupSpan+late {
			pred, alone = min(pred, r.pred), false
		}
	}
	return pred, alone
}

// answeredDep marks departure seq answered, if it is remembered: an answer
// that stated no quota (a throttle of another limit, a global one) still
// says the request is no longer in flight.
func (m *serverModel) answeredDep(seq uint64) {
	if m.deps != nil {
		if r := &m.deps[seq%depRing]; r.seq == seq {
			r.done = true
		}
	}
}

// pending returns the departures not answered yet.
func (m *serverModel) pending() float64 {
	n := 0
	for i := range m.ring() {
		if r := &m.deps[i]; r.seq != 0 && r.ok && !r.done {
			n++
		}
	}
	return float64(n)
}

// atMost lowers the model to n requests at now, if it holds more.
func (m *serverModel) atMost(now int64, n float64) {
	if l := m.level(max(now, m.at)); l > n {
		m.correct(now, now, n-l)
	}
}

// holdBefore returns the departures before rec that are not answered yet,
// and marks them held (see depRecord.held).
func (m *serverModel) holdBefore(rec *depRecord) float64 {
	n := 0
	for i := range m.ring() {
		if r := &m.deps[i]; r.seq != 0 && r.seq < rec.seq && r.ok && !r.done {
			r.held = true
			n++
		}
	}
	return float64(n)
}

// statedAfter returns the least quota left that the answers to departures
// after rec stated, and whether any came.
func (m *serverModel) statedAfter(rec *depRecord) (least float64, ok bool) {
	for i := range m.ring() {
		if r := &m.deps[i]; r.seq > rec.seq && r.stated && (!ok || r.left < least) {
			least, ok = r.left, true
		}
	}
	return least, ok
}

// judge grows the margin after a prediction the server proved wrong (a
// throttle where the model saw room, or at least two fewer left than
// predicted, e: a count of whole requests is a level up to one above it,
// so one fewer is within the noise of a measured rate), and shrinks it
// after a run of right ones.
func (m *serverModel) judge(throttled bool, e float64) {
	if throttled || e <= -2 {
		m.margin = min(m.margin+1, max(m.cap/4, 1))
		m.right = 0
		return
	}
	if m.right++; m.right >= marginDecay {
		m.margin = max(m.margin-1, 0)
		m.right = 0
	}
}

// correct moves the model, and every prediction for departures at or after
// at, by e tokens.
func (m *serverModel) correct(now, at int64, e float64) {
	m.tokens, m.at = m.level(max(now, m.at))+e, max(now, m.at)
	for i := range m.ring() {
		if r := &m.deps[i]; r.seq != 0 && r.at >= at {
			r.pred += e
		}
	}
}

// bound narrows the refill rate with a response that says left remain and
// the bucket is full again after reset. A reset of whole seconds, or one
// that contradicted earlier ones (an absolute time of whole seconds
// measured against an estimate of the server's clock), is known to within
// a second either way; any other to within a millisecond.
func (m *serverModel) bound(left float64, reset time.Duration) {
	lo, hi := rateBounds(m.cap, left, reset, m.coarse || m.wholeSeconds(reset))
	if (m.hi > 0 && lo > m.hi) || (hi > 0 && hi < m.lo) {
		// Bounds that contradict the earlier ones: the resets are coarser
		// than they look, the limit changed, or the server resets windows
		// rather than refilling. Start again, from coarse bounds; a
		// contradiction of coarse bounds is a fixed window: its quota
		// comes back all at once, at resets that stay put.
		if m.coarse {
			m.takeWindows()
			return
		}
		m.coarse = true
		m.lo, m.hi = rateBounds(m.cap, left, reset, true)
	} else {
		m.lo = max(m.lo, lo)
		if hi > 0 && (m.hi == 0 || hi < m.hi) {
			m.hi = hi
		}
	}
	if !m.rateStated {
		m.rate = m.clamp(m.rate)
	}
}

// wholeSeconds reports whether reset is to be read as stated to the second:
// a whole number of seconds from a key none of whose answers stated one
// to the millisecond.
func (m *serverModel) wholeSeconds(reset time.Duration) bool {
	return reset%time.Second == 0 && !m.msReset
}

// rateBounds returns the bounds on the refill rate (per nanosecond) of a
// bucket of capacity cap that holds left (a whole number: in fact a level in
// [left, left+1)) and is full again after reset, known to a millisecond or,
// if coarse, to a second. hi is 0 when there is no upper bound.
func rateBounds(cap, left float64, reset time.Duration, coarse bool) (lo, hi float64) {
	u := time.Millisecond
	if coarse {
		// A second of rounding, and what an absolute reset adds: the
		// width of the clock offset's bounds and the time in flight.
		u = time.Second + 250*time.Millisecond
	}
	lo = max(cap-left-1, 0) / float64(reset+u)
	if reset > u {
		hi = (cap - left) / float64(reset-u)
	}
	return lo, hi
}

// answerResolution returns how far the reset of the answer being observed
// may be from the truth: a second and what the clock offset and the flight
// add, if it was stated to the second; else the jitter of the flight.
func (m *serverModel) answerResolution() int64 {
	if m.secondReset {
		return int64(time.Second + 250*time.Millisecond)
	}
	return stillTolerance
}

// clamp returns r within the bounds stated resets put on the rate.
func (m *serverModel) clamp(r float64) float64 {
	r = max(r, m.lo)
	if m.hi > 0 {
		r = min(r, m.hi)
	}
	return r
}

// remeasure corrects an unstated rate by the innovations of the span that
// ends at now: a model that had to be corrected by e tokens over a span of
// T refilled e/T too slowly.
//
// Remaining counts are whole numbers: an answer of r says the level lies
// in [r, r+1), and the model is corrected to its floor, so one innovation
// is off by up to a request. Over a span that refills only about one (a
// bucket of one a second, measured over 0.8 s), that error is the whole
// rate: a throttle of a model a third too fast cut 1.3/s to 0.03/s, and a
// bucket of one, whose answers say 0 whatever its rate, never corrected it
// back up (15 requests took 7 minutes). A span that cuts the rate is long
// enough for the rate measured so far to refill rateQuanta requests.
//
// One that raises it need not be, where answers state resets: more left
// than predicted is no rounding (the counts err low), and a bucket of 50/s
// burst 5, whose first bounds said 2/s, climbed to its rate in 2 s spans
// (0.68 of the least time, from 0.81-0.91). Where no answer states a
// reset, it must: a fixed window's quota comes back all at once, which
// over a short span looks like a fast refill, and a model that took it
// for one trickled into a window that blocks for 30 s on a violation,
// again and again (40 requests in 5m16s, not 1m13s).
//
// One span cuts the rate by half at most: a request short over a span of
// a few seconds is what a fixed window with no trickle (or a refill by
// whole requests) looks like between its turns, not proof that the quota
// comes back in hours. Taken whole, one such span cut 0.21/s to
// 0.0009/s, and a key waited 37 minutes for a window of 3 per 10 s.
func (m *serverModel) remeasure(now int64) {
	span := now - m.spanAt
	if span < rateSpan || ((m.spanInnov < 0 || m.resetSeen == 0) && m.rate > 0 && float64(span)*m.rate < rateQuanta) {
		return
	}
	if m.spanInnov != 0 {
		m.rate = m.clamp(max(m.rate+m.spanInnov/float64(span), m.rate/2))
	}
	m.spanAt, m.spanInnov = now, 0
}

// idle reports whether the model knows nothing a new one would not find
// out again at no cost: its bucket is full and no window is pending.
func (m *serverModel) idle(now int64) bool {
	return !m.known || (m.level(now) >= m.cap && m.resetAt <= now && m.nextAt <= now)
}

// level returns the requests the model holds at now.
func (m *serverModel) level(now int64) float64 {
	t := m.tokens
	if m.rate > 0 {
		t = min(m.cap, t+m.rate*float64(max(now-m.at, 0)))
		if m.resetAt > m.at && now >= m.resetAt {
			// A stated reset refills the bucket whatever the rate measured
			// says (a rate measured from sparse demand is only a lower
			// bound), less the departures the server may count after it.
			t = max(t, min(m.cap, m.cap-float64(m.sinceReset)+m.rate*float64(now-m.resetAt)))
		}
	} else if m.resetAt > 0 && now >= m.resetAt {
		t = max(t, m.cap)
		if next := m.nextReset(now); next > now && now >= next-int64(m.gap) && (m.period <= 0 || int64(m.gap) < m.period/2) {
			// Past the reset, and no request left since: a window's next
			// end is a period on, and may come sooner (see gap).
			t = 0
		}
	} else if now < m.resetAt && now >= m.resetAt-int64(m.gap) {
		// The window may have ended (see gap); a model that has not seen
		// it is one yet, but will refill in full at resetAt, is held too.
		t = min(t, 0)
	}
	if m.window {
		// A window never holds more than its quota, whatever the answers
		// of another window corrected the model by.
		t = min(t, m.cap)
	}
	return t
}

// nextReset returns the first reset after now: resetAt, or, for a window
// of known length whose stated reset has passed with no departure since,
// the end of the window that holds now (a period on, and on).
func (m *serverModel) nextReset(now int64) int64 {
	if m.resetAt > now || m.resetAt <= 0 || !m.window || m.period <= 0 {
		return m.resetAt
	}
	return satAdd(m.resetAt, satMul((now-m.resetAt)/m.period+1, m.period))
}

// periodFrom returns a window's length from p, the span between two of
// its resets: p, unless it is a multiple of the length known (give or
// take the jitter of the answers that stated them), as the span over a
// window that no answer came in is.
func (m *serverModel) periodFrom(p int64) int64 {
	if m.period <= 0 || p < m.period*3/2 {
		return p
	}
	n := (p + m.period/2) / m.period
	if abs64(p-n*m.period) <= max(windowTolerance, m.period/10) {
		return m.period
	}
	return p
}

// maxModelReset is the longest reset the model takes in: a monthly quota's.
const maxModelReset = 32 * 24 * time.Hour

// maxGap bounds serverModel.gap: an answer slower than that says little of
// when its window ends.
const maxGap = int64(250 * time.Millisecond)

// earliest returns the earliest instant at or after now at which n more
// requests may leave.
func (m *serverModel) earliest(now int64, n float64) int64 {
	if !m.known {
		return now
	}
	d := max(now, m.at)
	if m.spread {
		d = max(d, m.nextAt)
	}
	// With a refill, keep one request in reserve (if the bucket holds two),
	// and the margin the model's errors taught: the server may count a
	// request later than it left, in another order than it left, and an
	// estimated rate may be a little high. Kept back once, the reserve
	// costs a refilling bucket nothing after its first burst.
	need := n
	if m.rate > 0 && m.cap >= 2 {
		need = min(n+1+math.Floor(m.margin), max(m.cap-1, n+1))
	}
	level := m.level(d)
	switch {
	case level >= need:
		return d
	case m.rate > 0:
		at := satAdd(d, int64(math.Ceil((need-level)/m.rate)))
		if m.resetAt > d && m.resetAt < at && m.level(m.resetAt) >= need {
			at = m.resetAt // the stated reset refills it sooner
		}
		return at
	case m.nextReset(d) > d:
		next := m.nextReset(d)
		if left := max(level, 0) + m.cap; n > left && m.window && m.period > 0 && m.cap >= 1 {
			// Not all in the next window: the windows after it, each of
			// its quota. Asked of a request deep in the queue, the time is
			// a bound from below, which a deadline is held to: taken as
			// endless, it failed at once a request whose turn came in
			// seconds.
			next = satAdd(next, satMul(int64(math.Ceil((n-left)/m.cap)), m.period))
		}
		return next
	case n <= 1:
		// Nothing says when it comes back: one request at a time finds
		// out, a while after the last one left, so that a bucket that
		// refills has done some of it, and its answer measures the rate.
		// (A model below empty, after a throttle that said nothing, with
		// neither rate nor reset, would wait for good otherwise: nothing
		// leaves, so nothing corrects it.)
		return max(d, satAdd(m.lastTake, probeGap))
	}
	return satAdd(d, int64(time.Second))
}

// modelWait returns how long from now k's model of the server expects
// before its next request is admitted.
func (k *keyState) modelWait(now int64) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return time.Duration(max(k.model.earliest(now, 1)-now, 0))
}

// note records departure seq at now, paced by another model: it counts in
// what was sent (recent), not in the level.
func (m *serverModel) note(now int64, seq uint64) {
	if m.deps != nil {
		m.deps[seq%depRing] = depRecord{seq: seq, at: now}
	}
}

// take records departure seq at now.
func (m *serverModel) take(now int64, seq uint64) {
	if !m.known {
		if m.deps != nil {
			m.deps[seq%depRing] = depRecord{seq: seq, at: now}
		}
		return
	}
	now = max(now, m.at)
	level := m.level(now)
	m.tokens, m.at, m.lastTake = level-1, now, now
	if now < m.resetAt && m.sinceReset < math.MaxInt32 {
		m.sinceReset++
	}
	if m.resetAt > 0 && now >= m.resetAt {
		// The reset is taken into tokens; a window's next one is a period on.
		m.resetAt = 0
		if m.window && m.period > 0 {
			m.resetAt = m.resetSeen + (now-m.resetSeen)/m.period*m.period + m.period
		}
	}
	m.track()
	m.deps[seq%depRing] = depRecord{seq: seq, at: now, pred: m.tokens, ok: true}
	if m.spread {
		// Spread what is left evenly until it comes back.
		switch {
		case m.rate > 0:
			m.nextAt = satAdd(now, int64(1/m.rate))
		case m.resetAt > now && level > 1:
			m.nextAt = now + int64(float64(m.resetAt-now)/level)
		}
	}
}

// recent returns the departures n over the second before now, or since
// since if that is later (the end of a pause, when nothing could leave), and
// the span in seconds they were counted over, as far as the departures
// remembered reach. ok is false when that span is too short to say.
func (m *serverModel) recent(now, since int64) (n, span float64, ok bool) {
	since = max(since, now-int64(time.Second))
	if now-since < int64(250*time.Millisecond) {
		return 0, 0, false
	}
	c, oldest := 0, now
	for i := range m.ring() {
		if r := &m.deps[i]; r.seq != 0 && r.at >= since && r.at <= now {
			c++
			oldest = min(oldest, r.at)
		}
	}
	if c == depRing {
		since = oldest // the ring reaches back less far than the span
		c--
	}
	return float64(c), float64(now-since) / 1e9, true
}

// sentSince returns the departures that left at or after since and before
// departure seq, and the span in seconds from since to seq's departure:
// what the server counted before it throttled seq, and over how long (the
// requests sent after seq, still on their way, are not its). ok is false
// when seq's departure is not remembered, left less than 50 ms after since,
// or the departures remembered do not reach back to since.
func (m *serverModel) sentSince(since int64, seq uint64) (n, span float64, ok bool) {
	if m.deps == nil {
		return 0, 0, false
	}
	rec := &m.deps[seq%depRing]
	if rec.seq != seq || rec.at-since < int64(50*time.Millisecond) {
		return 0, 0, false
	}
	c, reach := 0, rec.at
	for i := range m.deps {
		if r := &m.deps[i]; r.seq != 0 && r.seq < seq {
			reach = min(reach, r.at)
			if r.at >= since {
				c++
			}
		}
	}
	if reach >= since {
		return 0, 0, false // the ring holds nothing from before since
	}
	return float64(c), float64(rec.at-since) / 1e9, true
}

// aimd adapts a rate to throttles that state no quota: a multiplicative
// cut on a throttle, then a cubic climb back (CUBIC, as in the AWS SDKs'
// adaptive retry mode), never above ceiling. The first throttle of a key
// usually answers a burst and says nothing of the rate the server
// sustains, so after it the rate doubles every second (slow start) until a
// second throttle shows where the server's limit is.
type aimd struct {
	active  bool
	slow    bool        // slow start: no throttle of a paced request yet
	climb   int32       // ms from cutAt to the start of the climb: the end of the pause the cut came with
	rate    float64     // requests per second now
	wmax    float64     // the rate at the last cut
	cutAt   int64       // when the last cut happened
	cutSeq  uint64      // departures sent before the last cut
	ceiling float64     // requests per second; 0 means none
	c       *aimdCycles // from the first cut on
}

// aimdCycles is what a key's aimd keeps once it has cut: allocated then,
// so that a key that was never throttled stays small.
type aimdCycles struct {
	burst float64 // requests the server let through at once, as far as known
	keep  float64 // the share of wmax the last cut kept; 0: aimdBeta
	k     float64 // seconds the climb back to wmax takes; 0: aimdK

	// Cycles, for a server that names a wait on its throttles (see
	// measure): what it let through from the end of one wait to its next
	// throttle, and what a wait brings back at once.
	first     bool    // the first burst's span is known (lastAt1)
	b0        float64 // what a wait brings back at once, once measured; 0: not yet
	n2, s2    float64 // the second cycle's measure: departures before its throttle, over how long
	even      bool    // what a wait brings back leaves at the pace, not at once (see measure)
	resumeAt  int64   // when the last wait named ends; 0: none
	resumeN   uint64  // departures sent before it
	cycleAt   int64   // the first departure at or after it; 0: none yet
	cycleOn   bool    // cycleAt is set
	cyclePace float64 // the pace when it began, requests per second
	free      float64 // requests that may leave from resumeAt on without the pace
	burstN    float64 // free, as the wait began
	win       bool    // the cycles look like a window's: all comes back at once
	wait      int64   // the last wait named
	heard     uint64  // answers to departures after resumeN (see holds)
	lastAt1   int64   // when the first burst's last departure left
	sent1     float64 // departures when the first burst's throttle came
	t1        float64 // the first burst's span, in seconds, as measure took it; 0: unknown
	ans0      int64   // when the first burst's first throttle came back
	ans1      int64   // when its last throttle came back, as far as known
	floor     float64 // the least pace the cut being made may keep (see measure); 0: none
	flight    float64 // the time answers in the cycle take to come back, smoothed, ns; 0: none heard
	flightVar float64 // its mean deviation, ns
	serialAt  int64   // when the cycle's departures began to wait for answers (see serial); 0: not yet
	serialEnd bool    // they no longer do
	heardAt   int64   // when the last answer heard came (see heardFrom)
	tried     int64   // when the cycle's first departure, a try, went through (see triedAt); 0: not
	// fine: the last cut's rate was measured to within a few percent
	// (fitKeep), by a cycle that could not let the server's bucket
	// overflow (not capped: an overflow makes the count a bound from
	// below); the climb past it explores at the scale of its error.
	fine bool
	// marks: departures of the cycle under way, every stride-th from its
	// first (see mark).
	marks  [cycleMarks]depMark
	nMarks int
	stride uint64
	// rLo, rHi: the least and the most rate the cycles so far bound, and
	// the span the least was found over (see bracket); 0: none.
	rLo, rLoSpan, rHi float64
	// loose: the second cycle's count (n2) is a bound from below (the
	// cycle let the bucket overflow), not a point on the line that later
	// cycles are measured against (see bracket).
	loose bool
	// pen is what the last block the key met cost, in ns: from its first
	// throttle to the answer that ended it (see blocked); 0: none.
	// penEnd is when that answer came, and penSeq the departures sent
	// before the try it answered, until a cut takes them in; penEnd 0:
	// none to take in.
	pen, penEnd int64
	penSeq      uint64
	// named: the first throttle named a wait that may be a block's (see
	// namedBlock).
	named bool
}

// floorKeep is the share kept of a pace a window's quota a wait sustains
// (see measure): a pace of exactly its quota a window meets a window's
// boundary now and then with one request too many.
const floorKeep = 0.98

// cycles returns a's aimdCycles, allocating them.
func (a *aimd) cycles() *aimdCycles {
	if a.c == nil {
		a.c = new(aimdCycles)
	}
	return a.c
}

// freeFor reports whether n requests leaving at d are of what a wait
// brought back (see aimdCycles.waited), which the pace does not hold.
func (a *aimd) freeFor(n, d int64) bool {
	return a.c != nil && a.c.free >= float64(n) && d >= a.c.resumeAt
}

const (
	// aimdBeta is the share of the rate kept after a cut. A throttle that
	// names a wait costs the whole wait, so the climb back is slow and
	// starts high: most of the time is spent just under the limit.
	aimdBeta = 0.9
	// aimdK is the time the cubic takes to climb back to the rate at the
	// last cut, whatever that rate.
	aimdK     = 12 * time.Second
	aimdFloor = 0.5 // requests per second
	// aimdDeep is the share kept after a later cycle (past the second)
	// that let through no more than the first burst did and one, with
	// nothing measured and nothing sent at once after the wait: the pace
	// drained what the wait brought back at once. A bucket of one request
	// throttles the second request after a wait at any pace over its rate,
	// so such a throttle says nothing of how far over the pace is, and
	// halving finds the rate in a few throttles where aimdBeta took tens
	// (5/s burst 1, Retry-After of a second, from 16/s: 35 throttles of
	// 0.8 s each).
	aimdDeep = 0.5
	// aimdFirstPace is what slow start goes on from after the first
	// burst, in what it let through a second, when its throttles name a
	// wait. From what a flight of 32 workers sent (3 to 4 times that),
	// the cycle after the wait ran at 40-80/s against 20/s burst 10 and
	// was throttled within 0.15 s, too soon to tell a bucket from a
	// window: the pace was cut to what it let through and climbed back
	// over half a minute (0.73-0.86 of the least time when the flight
	// reached the server over 60 ms, as opening connections does, 0.97
	// now). Going on from once that a second, the cycle began under the
	// rate of 50/s burst 5 and let the bucket overflow (0.05 lower with
	// 32 workers); from 1.5 times that, 0.036 lower.
	aimdFirstPace = 1.5
)

// throttled cuts the rate after a throttle of a request sent as departure
// seq, at now. n requests left over the last span seconds (ok false: the
// span is unknown); afterPause reports that the span began at the end of a
// pause, when the server's bucket had refilled: then the bucket's size
// (as the first throttled burst showed it: the requests the server let
// through at once) went out on top of the rate. Only a request sent after
// the last cut can say that the cut rate is still too high, so the rest
// change nothing.
func (a *aimd) throttled(now int64, seq, sent uint64, n, span float64, ok, afterPause bool) {
	a.throttledAt(now, seq, 0, false, 0, 0, sent, n, span, ok, afterPause, nil)
}

// throttledAt is throttled for a departure that left at at, if atKnown
// (and the throttle named a wait), of a key whose first departure left at
// firstAt and whose last so far at last.
func (a *aimd) throttledAt(now int64, seq uint64, at int64, atKnown bool, firstAt, last int64, sent uint64, n, span float64, ok, afterPause bool, ring []depRecord) {
	a.cycles()
	if a.active && seq <= a.cutSeq {
		if a.c.named && a.c.n2 == 0 && a.c.burst > 0 {
			// Another of the first burst, of a key that resumes after the
			// block its throttle may have begun (see namedBlock): what
			// got through of it a second.
			a.c.burst--
			a.c.ans1 = now
			a.wmax = max(min(a.wmax, max(a.c.burst, 1)), aimdFloor)
			a.rate = a.at(now)
		}
		if a.slow && a.c.burst > 0 {
			a.c.burst-- // another of the first burst was throttled
			a.c.ans1 = now
			if atKnown {
				// The pace that sent the first burst was the workers', not
				// the server's: the server showed only what it let
				// through. Slow start goes on from a small multiple of
				// that a second (see aimdFirstPace).
				a.wmax = max(min(a.wmax, aimdFirstPace*max(a.c.burst, 1)), aimdFloor)
				a.rate = max(a.wmax*aimdBeta, aimdFloor)
			}
		}
		return
	}
	var measured float64
	keep, k, fine := aimdBeta, 0.0, false
	later := a.c.n2 != 0
	if atKnown && a.active {
		measured, keep, k, fine = a.measure(seq, at, firstAt, ring)
		if measured > 0 {
			ok = false
		} else {
			keep = aimdBeta
			if later && a.c.b0 == 0 && a.c.cycleOn && at >= a.c.cycleAt && float64(seq-1-a.c.resumeN) <= max(a.c.burst, 1)+1 {
				keep = aimdDeep
			}
		}
	}
	switch {
	case measured > 0:
	case !a.active:
		// The first throttle: of a burst, usually. What got through of it
		// is the bucket's size; its rate says nothing.
		measured, a.c.burst, a.c.sent1 = max(float64(sent)/max(span, 1), aimdFloor), float64(sent-1), float64(sent)
		a.c.first, a.c.lastAt1 = atKnown, last
		a.c.ans0, a.c.ans1 = now, now
	case ok:
		if afterPause {
			n = max(n-a.c.burst, 1)
		}
		measured = min(a.at(now), n/span)
		// What went through since the last cut, over the time since,
		// bounds the rate from below: a window's quota after its boundary
		// is no bucket's burst on top of a rate.
		if cycle := float64(now-a.cutAt) / 1e9; seq > a.cutSeq && cycle > 0 {
			c := float64(seq-a.cutSeq-1) / cycle
			if a.c.b0 == 0 {
				// (With what a wait brings back sent at once, the cycle's
				// pace is what the server sustains, not the pace cut so far.)
				c = min(a.at(now), c)
			}
			measured = max(measured, c)
		}
	default:
		measured = a.at(now)
	}
	if atKnown && a.active {
		measured, keep, k, fine = a.bracket(ring, seq, at, later, measured, keep, k, fine)
	}
	// The floor bounds the pace kept, not the rate cut from: a deep cut
	// (aimdDeep) from a pace over a log's quota a wait went under it (a
	// log of 20 per second over answers of 300 ms, throttled at 25/s
	// with 21 through, was cut to 12.5/s, and the next cycle, which
	// measured the climb back, paced it at 17/s: 0.644 of the least time
	// with 8 workers, 0.632 with 32; 0.669 and 0.710 now).
	if f := a.c.floor; floorKeep*f > measured*keep {
		measured, keep, k, fine = f, floorKeep, 0, false
	}
	a.c.fine = fine && measured > 0
	a.c.floor = 0
	if a.ceiling > 0 {
		measured = min(measured, a.ceiling)
	}
	a.slow = !a.active
	a.active = true
	a.wmax = max(measured, aimdFloor)
	a.c.keep, a.c.k = keep, k
	a.rate = max(a.wmax*keep, aimdFloor)
	a.cutAt, a.cutSeq, a.climb = now, sent, 0
}

// measure returns the rate that the cycle throttled at departure seq
// (which left at at) measured, for a server that names a wait on its
// throttles, with the share of it to keep, the climb's length in seconds
// (0: aimdK) and whether it measured it well (see aimdCycles.fine); 0s
// when it measured none.
//
// While a key waits, the server refills its bucket (or starts a new
// window, or its log empties): a cycle, from the first departure after
// a named wait to the first throttle of a departure after it, lets
// through what the wait brought back, b0, and what came back since, at
// rate r: n = b0 + r·s. The first burst is such a cycle too, from the
// key's first departure (its count, a.c.burst, is a level known to within
// one request, and the requests of one flight reach the server in any
// order). Two cycles of different spans measure both: the second with
// the first roughly (the first is short), any later and longer one with
// the second well. A cycle that lets through no more than the first burst
// did, after a wait longer than a second, is a window's (or a log's): its
// quota comes back at once, b0, and nothing between; the pace is then
// measured as for any throttle. (A wait of a second says as much of a
// small bucket; a window that a later cycle shows refilling between is a
// bucket after all; a cycle after a wait of a second cannot tell a window
// from a small bucket, and the pace is cut no lower than the first burst a
// wait.) What a wait brings back leaves at once when it ends,
// but a request (see waited); a throttle among those or right after them
// shows it smaller. A later cycle that began under the rate let the bucket
// overflow and counts less than came back: the departures since the bucket
// was last full, as far as remembered (ring), measure it (lastFull).
func (a *aimd) measure(seq uint64, at, firstAt int64, ring []depRecord) (rate, keep, k float64, fine bool) {
	if !a.c.cycleOn || at < a.c.cycleAt || seq <= a.c.resumeN+1 {
		return 0, 0, 0, false
	}
	n := float64(seq - 1 - a.c.resumeN) // all went through: seq is the cycle's first throttle
	s := float64(at-a.c.cycleAt) / 1e9
	switch {
	case a.c.n2 == 0:
		if !a.c.first {
			return 0, 0, 0, false
		}
		// The first burst let through a1, the bucket and what came back
		// until the last of them reached the server. Its departures are
		// taken as even over its span, and that is the share a1 of the
		// sent1 sent by its throttle's answer, but no less than half: a
		// worker alone sends one request after another and the bucket
		// empties at the end (with half, a bucket of 20/s burst 10 at 20
		// ms a request measured 8/s and was paced at 14/s for 25 s); a
		// flight of workers leaves at once, and what came back meanwhile
		// reached the server in a later flight (as half, 32 workers over
		// loopback measured 20/s burst 10 at 16/s; as a1/sent1, a third,
		// at 15/s). The cycle's level at its throttle lies between its
		// count and one more.
		a1 := a.c.burst
		t1 := float64(a.c.lastAt1-firstAt) / 1e9 * min(max(a1/max(a.c.sent1, 1), 0.5), 1)
		// A flight that left at once may reach the server over a longer
		// span (connections being opened, 60 ms for 32 over loopback;
		// more for TLS over a network), and the bucket refilled over
		// that: its throttles came back over as long.
		t1 = max(t1, float64(a.c.ans1-a.c.ans0)/1e9)
		a.c.n2, a.c.s2, a.c.t1 = n, s, t1
		if n <= a1+1 || s-t1 < 0.1 {
			a.quotaBack(n)
			return 0, 0, 0, false
		}
		rate = (n + 0.5 - a1) / (s - t1)
		span := s - t1
		if l := float64(a.c.tried-a.c.cycleAt) / 1e9; a.c.tried != 0 && l > 0 && s-l-t1 >= 0.1 {
			// The cycle began with a try, alone for its round trip l
			// (see strikes): a bucket that refills a request in l or
			// less was full again when the pace began, and let through
			// the try, then what it held and what came back since the
			// pace began. (Over answers of 100 ms, a bucket of 20/s
			// burst 10 was measured at 11.5/s over the whole cycle, at
			// 13/s so.) One that refills slower gives the count above.
			if r := (n - 0.5 - a1) / (s - l - t1); r*l >= 1 {
				rate, span = r, s-l-t1
			}
		}
		a.c.b0 = max(a1-rate*t1, 1)
		capped := a.capped(rate, s, 0)
		a.c.loose = capped
		keep, k = fitKeep(rate, span, capped)
		return rate, keep, k, k == 0 && !capped
	case !a.c.win && a.c.burstN > 0 && n <= a.c.burstN+1:
		// Throttled with what the wait brought back, or right after it:
		// it brings back less than measured, not the pace too fast.
		a.c.b0 = max(min(a.c.b0-1, n), 1)
		return a.wmax, a.c.keep, a.c.k, a.c.fine
	case !a.c.win && a.c.burstN > 0 && a.c.wait > 0 && n-a.c.burstN+2 < min(a.c.cyclePace, a.c.b0/(float64(a.c.wait)/1e9))*s:
		// Throttled soon after what the wait brought back, with fewer
		// through since than the pace, or than any bucket that refilled
		// that much in the wait, lets through: what came back does not
		// trickle in. A window whose boundary the named wait runs past
		// (a second, rounded up): the burst spends its quota and the
		// pace right after overruns it, a throttle a window (30 per 1 s
		// entered 0.7 s in: 0.74 of the least time). What a wait brings
		// back leaves at the pace from now on, which keeps to that much
		// a wait (see floor).
		a.c.even = true
		a.c.floor = a.c.b0 / (float64(a.c.wait) / 1e9)
		return 0, 0, 0, false
	case a.c.win && n >= a.c.burstN+2 && s > 0:
		// More came through after what the wait brought back than a
		// window's probe: a bucket that refills after all.
		rate = (n + 0.5 - a.c.b0) / s
		a.c.win, a.c.n2, a.c.s2 = false, n, s
		keep, k = fitKeep(rate, s, false)
		return rate, keep, k, k == 0 && !a.overflows(rate, a.c.cycleAt, at, a.c.burstN)
	case a.c.win:
	case s-a.c.s2 >= 1 && n > a.c.n2+1 && !(a.c.loose && a.loFine(a.bounds(ring, seq, at))):
		rate = (n - a.c.n2) / (s - a.c.s2)
		b0 := a.c.n2 - rate*a.c.s2
		if a.c.b0 > 0 || a.c.n2 >= a.c.burst-1 {
			// Measured before, it moves by a request a cycle at most;
			// never measured, and a second cycle that let through as
			// much as the first burst did (a window's or a log's quota,
			// 20 per 1 s: 13 at once after each wait overran it), none
			// is taken as sent at once.
			b0 = min(b0, a.c.b0+1)
			if a.c.n2 >= a.c.burst-1 && a.c.n2 <= a.c.burst+1 && s > 0 {
				// A window's or a log's: the second cycle's count is its
				// quota at once, and a later one, sent at the pace with
				// nothing at once, lies under the line through it (a log
				// of 20 per 1 s: 18.7/s, from 229 let through in 11.5 s).
				// Its own count, but what it sent at once, over its span
				// is the pace the server let through (19.85/s there).
				rate = max(rate, (n-a.c.burstN)/s)
			}
		}
		// (Never measured, and a second cycle that let through less than
		// the first burst: a wait brings back less than the bucket holds,
		// 20 of 40 for 20/s burst 40, sent at once after each wait.)
		a.c.b0 = max(min(b0, a.c.burst), 1)
		span := s - a.c.s2
		full := false
		if r, d := a.lastFull(ring, seq, at); r > rate {
			// The cycle let the bucket overflow: what came through
			// since it was last full measures the rate.
			rate, span, full = r, d, true
		}
		keep, k = fitKeep(rate, span, false)
		return rate, keep, k, k == 0 && (full || !a.overflows(rate, a.c.cycleAt, at, a.c.burstN))
	}
	if !a.c.win && n <= a.c.burst+1 {
		// A later cycle that let through no more than the first burst
		// did says what the second would have. A window of 2 s entered
		// late names a wait of a second first (the second cycle cannot
		// tell), then of two: taken for a bucket, its cycles measured 7/s
		// of 10 (0.737). Windows of a second, whose later cycles were cut
		// to what they let through over the time since the last cut, wait
		// and all, were paced at 13/s of 20 with a worker alone (0.641).
		a.quotaBack(n)
	}
	return 0, 0, 0, false
}

// quotaBack takes in a cycle after a wait named that let through n, no
// more than the first burst did: after a wait longer than windowWait, the
// server is a window (or a log) whose quota comes back at once, n; after
// a wait of a second, a window's or a small bucket's, and since a window
// lets its quota through each wait at the least, the pace is cut no lower
// than that.
func (a *aimd) quotaBack(n float64) {
	a1 := a.c.burst
	switch {
	case a.c.wait > int64(windowWait):
		a.c.b0, a.c.win = max(min(n, a1), 1), true
	case a.c.wait > 0:
		a.c.floor = max(a.c.floor, min(n, a1)/(float64(a.c.wait)/1e9))
	}
}

// fitKeep returns the share of a rate measured over span seconds to keep,
// and the climb's length (0: aimdK): a count known to about a request
// measures the rate to about 1/span. Known to a few percent, the pace
// keeps under it by that much and climbs back over aimdK; known worse,
// the climb is short, so that the next throttle, after a longer cycle,
// measures it well.
func fitKeep(rate, span float64, capped bool) (keep, k float64) {
	u := 1 / span / rate
	switch {
	case capped:
		return aimdBeta, aimdKRough.Seconds() / 2
	case u <= 0.04:
		return 1 - u/2, 0
	}
	return aimdBeta, aimdKRough.Seconds()
}

// capped reports whether the cycle measured may have let the server's
// bucket fill up and overflow, which makes a measured rate a bound from
// below only: the key left under rate when the cycle began, for long
// enough to fill room, the bucket's room left after what the wait
// brought back (none if the key sent none of it at once).
func (a *aimd) capped(rate, span, room float64) bool {
	return a.c.cyclePace < rate && (rate-a.c.cyclePace)*span > max(room, 0)
}

// overflows reports whether a bucket refilling at rate may have filled up
// and overflowed between from and to while the key kept to its pace (at),
// room below full at from (what the wait brought back, sent at once): its
// count would then be a bound from below. Unlike capped, which takes the
// pace the cycle began with for all of it, it follows the climb: a pace
// 1.5 % under 20/s as a cycle of 28 s begins, back at it 12 s later, leaves
// about a request of refill unspent, where capped counts 9.
func (a *aimd) overflows(rate float64, from, to int64, room float64) bool {
	const steps = 256
	dt := float64(to-from) / steps
	d := 0.0
	for i := range steps {
		t := from + int64(dt*(float64(i)+0.5))
		if d = max(d+(rate-a.at(t))*dt/1e9, 0); d > max(room, 0) {
			return true
		}
	}
	return false
}

// lastFull returns the rate that the departures remembered (ring) before
// seq, the cycle's first throttle at at, bound from below, and the span
// it was measured over: from any departure j of the cycle on, the server
// let through what its bucket held then, at most B, and what came back
// since, so that r ≥ (seq−j−B)/(at−j's departure), and the most of these
// is r itself where the bucket was last full. A cycle that began under
// the rate let the bucket overflow, and its count measures less than r
// (a bucket of 50/s burst 5: 43/s); the departures since it was last full
// do not. B is taken as the larger of what a wait brings back and what the
// first burst let through, so the bound stays one; or, once the first
// burst's span t1 is known, as what it let through less what came back
// over that span at the rate bound, a1−r·t1, so that r ≥ (seq−j−a1)/(d−t1):
// a flight of 8 workers lets 7 through a bucket of 5 at 50/s, and a rate
// bound with 7 for B came 7 % low (46.6/s), where a1−r·t1 makes it 48/s.
// Only spans over which a request is under 4 % of the count are taken; 0s
// if none.
func (a *aimd) lastFull(ring []depRecord, seq uint64, at int64) (rate, span float64) {
	b := max(a.c.b0, a.c.burst)
	for i := range ring {
		r := &ring[i]
		if r.seq == 0 || r.seq >= seq || r.seq <= a.c.resumeN || r.at < a.c.cycleAt || r.at >= at {
			continue
		}
		d := float64(at-r.at) / 1e9
		c := (float64(seq-r.seq) - b) / d
		if a.c.t1 > 0 && d > 2*a.c.t1 {
			c = max(c, (float64(seq-r.seq)-a.c.burst)/(d-a.c.t1))
		}
		if c*d >= 25 && c > rate {
			rate, span = c, d
		}
	}
	return rate, span
}

// bracket checks the rate measured (with the share of it to keep, the
// climb's length and whether it was measured well, as measure returns
// them) for the cycle throttled first at departure seq, which left at at,
// against what its departures bound the rate to (see bounds), and returns
// them as they stand or as the bounds put them:
//
//   - Bounds within 10 % of each other pin the rate: the pace is held at
//     the least of them (5/s burst 1, where a throttle answers the first
//     gap under 0.2 s and the gaps before bound it from below: a count of
//     the cycle said 3.25/s of 5).
//   - Once the second cycle's count was a bound from below (loose), later
//     cycles measured against it came out over the rate (a bucket of 50/s
//     burst 10 measured at 52-58/s and throttled every few seconds); the
//     least bound measures them where it is measured well (loFine).
//   - A count under the least bound counts a cycle that began under the
//     rate and let the bucket overflow (50/s burst 5: 36/s, where the
//     cycle's departures show 45/s). Where the most is known and the least
//     is not measured well (or the count is over the most), the pace goes
//     half way, where a throttle halves the gap: within 30 % of each
//     other, it is held there (a bucket of 5/s burst 1 bounded at 4.1-5.2
//     after its second cycle: held at 4.7/s, no throttle more, where a
//     climb on to the most cost a third); further apart, it climbs there
//     from the least (aimdKRough). Else the least is taken.
//
// Throttles of what a wait brought back (see measure) and servers taken
// for a window are left as they are.
func (a *aimd) bracket(ring []depRecord, seq uint64, at int64, later bool, measured, keep, k float64, fine bool) (float64, float64, float64, bool) {
	if a.c.win || seq <= a.c.resumeN+1 || a.c.burstN > 0 && float64(seq-1-a.c.resumeN) <= a.c.burstN+1 {
		return measured, keep, k, fine
	}
	lo, hi, span := a.bounds(ring, seq, at)
	if p := a.at(at); a.c.burstN == 0 && (hi == 0 || p < hi) {
		// All of the cycle left at the pace, which climbed to p: a bucket
		// that refills at p or more throttles none of it.
		hi = p
	}
	// The cycles before bound the same rate: the most narrows over the run,
	// unless this cycle disagrees. Their least is taken only for a cycle
	// throttled before it could bound one (a bucket of one request, paced
	// half way between its bounds and over its rate, throttles the second
	// request after each wait): a window's quota at its boundary, taken for
	// a bucket's, bounds it over the rate (46 of 30 a second let through in
	// 0.5 s: 34/s), and held there it was throttled every second.
	c := a.c
	if c.rHi > 0 && c.rHi >= lo && (hi == 0 || c.rHi < hi) {
		hi = c.rHi
	}
	if seq-1-c.resumeN < 3 && c.rLo > lo && (hi == 0 || hi >= c.rLo) {
		lo, span = c.rLo, c.rLoSpan
	}
	if lo > 0 && (hi == 0 || hi >= lo) {
		c.rLo, c.rLoSpan, c.rHi = lo, span, hi
	}
	if lo <= 0 || hi > 0 && hi < lo || !(later && a.c.loose || lo > measured || hi > 0 && measured > hi) {
		return measured, keep, k, fine
	}
	switch {
	case hi > 0 && hi <= lo*1.1:
		measured, keep, k, fine = lo, 1, 0, true
	case later && a.c.loose && a.loFine(lo, hi, span):
		measured, keep = lo, 1
		_, k = fitKeep(lo, span, false)
		fine = k == 0
	case measured >= lo && (hi == 0 || measured <= hi):
	case hi > 0 && (lo*span < 10 || measured > hi):
		measured = (lo + hi) / 2
		keep, k, fine = lo/measured, aimdKRough.Seconds(), false
		if hi <= lo*1.3 {
			keep, k, fine = 1, 0, true
		}
	default:
		measured, keep = lo, max(keep, bracketKeep)
	}
	if !later {
		a.c.loose = true
	}
	return measured, keep, k, fine
}

// loFine reports whether lo, the least rate a cycle's departures bound
// over span seconds (as bounds returns them, with the most), measures the
// rate: over ten requests or more, and within loFineErr of it however
// small the bucket (the bucket is taken as B requests, the larger of what
// the first burst let through and what a wait brings back). Over a long
// round trip (120 ms) a flight of 8 workers let 26 through a bucket of
// 10, and a least of 38/s over 1.6 s, taken for 50/s, held the pace there
// (0.877 -> 0.722 of the least time over 30 s).
func (a *aimd) loFine(lo, _, span float64) bool {
	return lo*span >= 10 && (max(a.c.b0, a.c.burst, 1)+1)/(lo*span) <= loFineErr
}

// loFineErr is the most error, as a share of it, that loFine allows the
// least rate bound: with B over-counted, buckets of 50/s burst 5 and 10
// are bound at 48/s over 1.4-2 s, within 0.12-0.14 by that count.
const loFineErr = 0.15

// bracketKeep is the least share kept of the least rate a cycle's
// departures show the server to sustain, when its count was under it
// (see bracket).
const bracketKeep = 0.98

// cycleMarks is how many of a cycle's departures aimdCycles keeps, evenly
// spread by their numbers from its first on (see mark).
const cycleMarks = 32

// depMark is a departure kept of a cycle: its number and when it left.
type depMark struct {
	seq uint64
	at  int64
}

// mark notes departure seq at d, of the cycle under way, if it is one the
// marks keep: every stride-th from the cycle's first. When they are full,
// every other one is let go and the stride doubles, so that they span the
// whole cycle however long it runs.
func (a *aimd) mark(seq uint64, d int64) {
	c := a.c
	if c == nil || !c.cycleOn || seq <= c.resumeN || d < c.cycleAt {
		return
	}
	if c.stride == 0 {
		c.stride, c.nMarks = 1, 0
	}
	if (seq-c.resumeN-1)%c.stride != 0 {
		return
	}
	if c.nMarks == cycleMarks {
		for i := range cycleMarks / 2 {
			c.marks[i] = c.marks[2*i]
		}
		c.nMarks, c.stride = cycleMarks/2, 2*c.stride
		if (seq-c.resumeN-1)%c.stride != 0 {
			return
		}
	}
	c.marks[c.nMarks] = depMark{seq, d}
	c.nMarks++
}

// bounds returns the least and the most rate that a bucket of B requests
// may refill at, as the departures of the cycle throttled first at
// departure seq (which left at at) show it: those remembered (ring) and
// its marks (see mark); 0 for either that they do not bound. span is the
// span in seconds the least was found over.
//
// Each departure of the cycle before seq went through: from any i to any
// later j of them the bucket gave j−i requests and had one left for j, of
// at most B at i and what came back in between, so r ≥ (j−i+1−B)/(t_j−t_i)
// (lo), with B taken as the larger of what the first burst let through
// and what a wait brings back. Unlike the cycle's count (see measure), it
// does not fall when the cycle began under the rate and let the bucket
// overflow: over the span from where it was last full to the throttle it
// comes within about a request of the rate.
//
// And seq found less than one left: from the last instant f the bucket
// was full, it gave what left since and refilled at r, with no overflow,
// so r < (seq−i+1−B+g)/(t_seq−t_i) for the first departure i remembered
// at or after f, with g departures between f and i not remembered (hi);
// the most of these over i bounds r from above. B is taken as one there:
// what a wait brings back is measured, not bound from below (taken as 11
// of a bucket of 10, it put the most under the rate).
//
// The server counts a request when it comes, up to a round trip's
// deviation after it left (see heardFrom), which widens both.
func (a *aimd) bounds(ring []depRecord, seq uint64, at int64) (lo, hi, span float64) {
	c := a.c
	if !c.cycleOn || c.nMarks == 0 || c.marks[0].seq != c.resumeN+1 {
		return 0, 0, 0
	}
	var pts [cycleMarks + depRing]depMark
	n := 0
	in := func(s uint64, t int64) bool {
		return s > c.resumeN && s < seq && t >= c.cycleAt && t < at
	}
	for _, m := range c.marks[:c.nMarks] {
		if in(m.seq, m.at) {
			pts[n] = m
			n++
		}
	}
	for i := range ring {
		if r := &ring[i]; r.seq != 0 && in(r.seq, r.at) && (r.seq-c.resumeN-1)%c.stride != 0 {
			pts[n] = depMark{r.seq, r.at}
			n++
		}
	}
	ps := pts[:n]
	slices.SortFunc(ps, func(x, y depMark) int { return cmp.Compare(x.seq, y.seq) })
	bHi := max(c.b0, c.burst, 1)
	const bLo = 1
	slack := 2 * c.flightVar
	for i, p := range ps {
		g := 0.0
		if i > 0 {
			g = float64(p.seq - ps[i-1].seq - 1)
		}
		if d := float64(at-p.at) - slack; d > 0 {
			hi = max(hi, (float64(seq-p.seq)+1-bLo+g)/(d/1e9))
		} else {
			hi = math.Inf(1) // too close to tell
		}
		for _, q := range ps[i+1:] {
			if d := (float64(q.at-p.at) + slack) / 1e9; q.at > p.at && (float64(q.seq-p.seq)+1-bHi)/d > lo {
				lo, span = (float64(q.seq-p.seq)+1-bHi)/d, d
			}
		}
	}
	if math.IsInf(hi, 1) {
		hi = 0
	}
	return lo, hi, span
}

// aimdKRough is the climb's length after a rate measured roughly (see
// measure).
const aimdKRough = 4 * time.Second

// aimdFineScale is the least scale of the climb past a rate measured well
// (aimdCycles.fine): past it, the cubic gains wmax·scale·(t/k)³ over the
// time t since it reached wmax again (k, aimdK), so a bucket of b requests
// throttles again after about k·(4b/(wmax·scale·k))^¼. At the 5 % of any
// other cut, a bucket of 20/s burst 10 measured to within 0.2 % was
// throttled every 23 s, each throttle costing the refill it could not
// hold in the wait (a second: 10 requests), 0.97-0.98 of the least time
// for good; at the measure's error, every 50 s or more (0.98-0.99). At
// this floor a limit that doubles is found within two minutes.
const aimdFineScale = 0.001

// waited notes, after a cut, that nothing leaves before until, the end
// of a wait the server named, sent departures so far: what the wait
// brings back may leave at once then (see measure).
func (a *aimd) waited(until, wait int64, sent uint64) {
	a.cycles()
	a.c.resumeAt, a.c.resumeN, a.c.cycleOn, a.c.wait, a.c.heard, a.c.tried = until, sent, false, wait, 0, 0
	a.c.free = 0
	if a.c.b0 >= 2 && !a.c.even {
		// A request less than measured, in reserve: the count is known
		// to about a request.
		a.c.free = math.Floor(a.c.b0 - 1)
	}
	a.c.burstN = a.c.free
}

// triedAt notes that the strikes' try (see strikes) went through at now,
// sent departures so far: if it is the cycle's first and only departure,
// the cycle's pace began then.
func (a *aimd) triedAt(now int64, sent uint64) {
	if c := a.c; c != nil && c.cycleOn && c.tried == 0 && sent == c.resumeN+1 {
		c.tried = now
	}
}

// windowWait is the shortest wait after which a cycle that lets through
// no more than the first burst did is taken for a window's (or a log's):
// a bucket would have refilled more in it (see measure). A wait of a
// second says as much of a small bucket.
const windowWait = 1500 * time.Millisecond

// probing reports whether a cycle is under way whose answers are counted
// (heard), to hold its departures for them (see holds and serial): the
// cycle after the first named wait, before its throttle measured it; or
// any cycle of a server taken for a window.
func (a *aimd) probing() bool {
	return a.c != nil && a.c.resumeAt != 0 && (a.c.first && a.c.n2 == 0 || a.c.win)
}

// heardFrom notes an answer, throttled or not, to departure seq.
// flight is the time it took to come back, in ns, by now.
func (a *aimd) heardFrom(now int64, seq uint64, flight int64) {
	if !a.probing() || seq <= a.c.resumeN {
		return
	}
	a.c.heard++
	a.c.heardAt = max(a.c.heardAt, now)
	// As TCP smooths its round trip (RFC 6298).
	f := float64(max(flight, 0))
	if a.c.flight == 0 {
		a.c.flight, a.c.flightVar = f, f/2
		return
	}
	a.c.flightVar += (math.Abs(a.c.flight-f) - a.c.flightVar) / 4
	a.c.flight += (f - a.c.flight) / 8
}

// holds reports whether a departure at d, with sent departures so far,
// waits for the answers to the others of its cycle (hold), and whether it
// then leaves without the pace (alone).
//
// In the cycle after the first named wait, if that wait was longer than
// windowWait, those past what the first burst let through wait, until one
// of them is answered. A server of fixed windows (or a log) gave the
// first burst its quota and gives the cycle as much: the next request is
// throttled, and sent alone, it costs one throttle where the cycle's
// flight of them cost as many as were in flight (8 in a window of 50 per
// 5 s with 8 workers, 25 with 32). A bucket lets it through as it
// refills, and the cycle goes on at its pace. After a wait of a second,
// a small bucket refills too little to let the lone request through (20/s
// burst 10 over loopback, with 32 workers: 12 through, taken for a window
// of 11 a second and paced at 11/s for 47 s), and the cycle goes on as
// before, at slow start's pace.
//
// Once the server is taken for a window, those past what a wait brings
// back go alone, each after the answers to all before it, and not at the
// pace: the next request finds the quota spent, and its throttle names
// the next wait; sent at the pace (a wait's quota over the wait), it came
// up to a fifth of a second later. A log of 20 per 2 s gives its quota
// back 2 s after it was spent, so each wait named began that much later:
// 0.862 / 0.890 of the least time with 8 / 32 workers, 0.930 / 0.951
// alone. (A fixed window's boundary does not move with the probe: there
// it is as good either way, over ten instants to start at.) Two that go
// through say the server refills after all, and the pace takes over.
func (a *aimd) holds(d int64, sent uint64) (hold, alone bool) {
	if !a.probing() || d < a.c.resumeAt || sent < a.c.resumeN {
		return false, false
	}
	n := sent - a.c.resumeN
	if a.c.win {
		q := uint64(max(a.c.burstN, 0))
		alone = n >= q && a.c.heard <= q+1
		return alone && a.c.heard < n, alone
	}
	q := uint64(math.Max(math.Floor(a.c.burst), 1))
	return a.c.wait > int64(windowWait) && n >= q && a.c.heard < n && a.c.heard <= q, false
}

// serial reports whether a departure at d, paced, with sent departures
// so far, waits for the answers to all before it in its cycle.
//
// After a wait of windowWait or less, slow start's pace passes a request
// a round trip on its way to the server's rate and over: the request sent
// after the one the bucket refuses is in flight when that throttle comes
// back, and is refused too (a bucket of 20/s burst 10 with 22 ms round
// trips is throttled at some 45/s: twice in a second, in 12 of 100 runs
// with 8 workers, none now). So in the cycle after the first named wait,
// past what the first burst let through, and while the pace is between
// one and two requests a round trip, each departure waits for the answers
// to all before it: one throttle where there were two. Past two a round
// trip the pace goes on as before.
//
// A server that sustains more than a request a round trip is held under
// its rate meanwhile. A bucket that sustains half of it or less empties
// within 2·a1/p of it (the first burst's a1 at most, at p over its rate
// by p/2 or more): a cycle not throttled by then goes on in slow start
// from the pace it held, without the round trips. (Going on from where
// slow start would have been, a bucket of 50/s burst 10, held at 45/s,
// was throttled with two in flight as the pace leapt on, in 15 of 30 runs
// with 8 workers.) It costs such a bucket 0.03 of the least time in 12 s.
//
// A departure that waited for answers leaves, for the pace, when the
// last of them came (from): at the instant the pace let it go, long past,
// the pace would let those held meanwhile leave at once after it.
func (a *aimd) serial(d int64, sent uint64) (hold bool, from int64) {
	if !a.probing() || a.c.win || a.c.wait > int64(windowWait) || d < a.c.resumeAt || sent < a.c.resumeN || a.c.flight == 0 || a.c.serialEnd {
		return false, 0
	}
	n := sent - a.c.resumeN
	if n < uint64(math.Max(math.Floor(a.c.burst), 1)) {
		return false, 0
	}
	now := max(d, a.c.heardAt)
	// A round trip is taken as one that few come back later than, as TCP
	// takes its retransmission timeout (RFC 6298).
	rtt := a.c.flight + 2*a.c.flightVar
	if a.c.serialAt == 0 {
		if f := a.at(now) * rtt / 1e9; f < 1 || f >= 2 {
			return false, 0
		}
		a.c.serialAt = now
	}
	if now-a.c.serialAt > int64(2*max(a.c.burst, 1)*rtt) {
		// Not throttled at a request a round trip: slow start goes on from
		// that pace.
		a.c.serialEnd = true
		if a.slow {
			t := math.Log2(max(1e9/rtt/(a.wmax*aimdBeta), 1)) * 1e9 // since the climb began
			a.climb = int32(min(max(now-a.cutAt-int64(t), 0)/int64(time.Millisecond), math.MaxInt32))
		}
		return false, a.c.heardAt
	}
	return a.c.heard < n, a.c.heardAt
}

// left notes a departure at d, and reports whether it is one of what a
// wait brought back, sent without the pace.
func (a *aimd) left(d int64) bool {
	if a.c == nil {
		return false
	}
	if a.c.resumeAt != 0 && !a.c.cycleOn && d >= a.c.resumeAt {
		a.c.cycleAt, a.c.cycleOn, a.c.cyclePace = d, true, a.at(d)
		a.c.nMarks, a.c.stride = 0, 1
	}
	if a.c.free >= 1 && d >= a.c.resumeAt {
		a.c.free--
		return true
	}
	return false
}

// blocked notes that a block ended at now: throttles in a row, the
// server refusing even a lone request after a pause, from from on; seq
// departures were sent before the try that went through. Each throttle
// costs the key a block from then on: the cycle after it measures the
// rate the server sustains (see cycleRate), and the climb back to it
// takes penClimb blocks.
//
// A block that ends slow start (the first burst's throttle began it, and
// nothing since measured a rate) leaves the key at what that burst let
// through a second, climbing from there: slow start, doubling the pace
// every second, would be throttled within a second or two and meet a
// second block at once, and a bucket's burst is about a second of its
// rate at many APIs.
func (a *aimd) blocked(from, now int64, seq uint64) {
	c := a.cycles()
	first := c.pen == 0
	c.penalized(now-from, now, seq)
	if first {
		a.resumeAt(c.burst)
		a.cutAt, a.climb = now, 0
		a.rate = a.at(now)
	}
}

// penalized notes in c a block that cost pen ns and ends at end, seq
// departures sent before the try that ends it (see blocked).
func (c *aimdCycles) penalized(pen, end int64, seq uint64) {
	c.pen, c.penEnd, c.penSeq = max(pen, 1), end, seq
}

// resumeAt leaves a, out of slow start, at burst requests a second (its
// pace if lower; aimdFloor at least), on the default climb: where a key
// resumes after a block (see blocked, namedBlock).
func (a *aimd) resumeAt(burst float64) {
	a.slow = false
	a.wmax = max(min(a.wmax, burst), aimdFloor)
	a.c.keep, a.c.k, a.c.fine = 0, 0, false
}

// namedBlock notes that the first throttle of a key, at now, named a
// wait until end that a window cannot be told from a block by: in whole
// seconds, of blockLeast or more, and far longer than the first burst
// took (see blockSpan). (A wait to the millisecond, a date's or a global
// retry_after, names a window's end that learnedWindow reads; a wait
// shorter than blockLeast is left to the window's cycles: a block that
// short costs little, and a log of 20 per 2 s lost 0.04 of the least
// time to the second cycle spent over a second.) A server of fixed windows
// gives the burst's quota back at the next boundary, and would let it
// through again at once; one that blocked the burst's violation gives
// back its bucket, and meets a burst and a request more to find the
// window's end with the next block, every cycle (29 blocks of 10 s in
// 300 requests against 10/s burst 10). So the key resumes at what the
// burst let through a second, as after a block (see blocked), and
// climbs back over penClimb times the wait: a window's quota still goes
// through in each window, spent over a second rather than at once; a
// bucket's rate is reached with no throttle more.
func (a *aimd) namedBlock(now, end int64, sent uint64) {
	c := a.cycles()
	c.named = true
	c.penalized(end-now, end, sent)
	a.resumeAt(max(c.burst, 1))
	a.climbFrom(end)
	a.rate = a.at(now)
}

// windowAfterAll reports, for the first throttle since the wait
// namedBlock took in (departure seq, naming a wait), whether the server
// is a window (or a log) after all, and if so forgets the block and
// returns the first wait: a window's wait ends at its boundary, and the
// cycle, spent over a second and more at the pace, leaves less of it
// than the first burst's did (a log's, as much less: its quota comes
// back as it was spent); a block's is named anew from the violation, as
// long as before. A log gives back the quota the cycle spent over its
// span only as long as the first wait after it: the key waits that long,
// or the cycles after it would find it spread (a log of 20 per 2 s, when
// waits of 2 s were taken in, named waits of a second from then on, and
// each cycle was throttled in flights: 0.93 -> 0.89 of the least time);
// a window's next boundary is then that span late, once.
func (a *aimd) windowAfterAll(seq uint64, wait int64) (first int64, ok bool) {
	c := a.c
	if c == nil || !c.named || c.penEnd == 0 || seq <= c.penSeq || wait >= c.pen-int64(blockShorter) {
		return 0, false
	}
	first = c.pen
	c.named, c.pen, c.penEnd = false, 0, 0
	return first, true
}

// blockShorter is how much shorter than the wait the first throttle named
// the next one is, at the least, for the server to be taken for a window
// (see windowAfterAll): Retry-After in seconds rounds both up.
const blockShorter = 500 * time.Millisecond

// blockSpan is how many times longer than the span its first burst took
// a wait its first throttle names is to be taken as a block's as much as
// a window's (see namedBlock).
const blockSpan = 4

// penClimb is how many times the cost of its last block a key's climb
// back to the rate of its last cut takes, at least (see aimdK): a climb
// of 12 s past the rate that met a block of 30 s met the next one 40 s
// later, and the blocks took more than half the time. Over penClimb
// blocks the next throttle comes, if it comes, after some 2·penClimb of
// them: a block is then about a tenth of the time.
const penClimb = 4

// cycleRate returns the rate that the departures from the end of the
// last block (see blocked) up to the throttle of departure seq measure,
// sentSince them, if any: the server's bucket was full when the block
// ended, so those past what it held (burst, as the first throttle showed
// it) came back at its rate, and ok false when no block's end is to be
// taken in. The end is taken in once.
func (a *aimd) cycleRate(seq uint64, sentSince func(since int64, seq uint64) (n, span float64, ok bool)) (rate float64, ok bool) {
	if a.c == nil || a.c.penEnd == 0 || seq <= a.c.penSeq {
		return 0, false
	}
	n, span, ok := sentSince(a.c.penEnd, seq)
	a.c.penEnd = 0
	if !ok || span <= 0 {
		return 0, false
	}
	// The try that ended the block left before penEnd; seq found less
	// than one left. A window's (or a log's) quota comes back at once,
	// not at a rate: one that the cycle spent within its span says its
	// rate is no less than about half the quota over the span (a log of
	// 20 per second, its quota spent in 0.9 s after a block, was taken
	// for a bucket of 1/s and paced at that for minutes).
	n += 2
	return max(n-max(a.c.burst, 1), n/2, 1) / span, true
}

// climbFrom makes the climb from the last cut start at at, on the pacer's
// clock, if that is later than it starts.
func (a *aimd) climbFrom(at int64) {
	ms := min(max(at-a.cutAt, 0)/int64(time.Millisecond), math.MaxInt32)
	a.climb = max(a.climb, int32(ms))
}

// idle reports whether the last cut is long enough ago to be forgotten.
func (a *aimd) idle(now int64) bool {
	return !a.active || now-a.cutAt > int64(10*time.Minute)
}

// at returns the rate at now: doubling every second since the last cut in
// slow start, else on the cubic curve since it.
func (a *aimd) at(now int64) float64 {
	t := max(float64(now-a.cutAt-int64(a.climb)*int64(time.Millisecond))/1e9, 0)
	var r float64
	if a.slow {
		r = a.wmax * aimdBeta * math.Exp2(min(t, 60))
	} else {
		keep, k, pen := 0.0, 0.0, int64(0)
		if a.c != nil {
			keep, k, pen = a.c.keep, a.c.k, a.c.pen
		}
		if keep == 0 {
			keep = aimdBeta
		}
		if k == 0 {
			k = aimdK.Seconds()
		}
		k = max(k, penClimb*float64(pen)/1e9)
		// The climb past wmax explores at the scale of its cut, and at
		// least 5 %; past a rate measured well (fine), at the scale of
		// the measure's error (see aimdFineScale).
		scale := max(1-keep, 0.05)
		if a.c != nil && a.c.fine {
			scale = max(1-keep, aimdFineScale)
		}
		c := a.wmax * scale / (k * k * k)
		r = c*math.Pow(t-k, 3) + a.wmax
		r = max(r, a.wmax*keep)
	}
	r = max(r, aimdFloor)
	if a.ceiling > 0 {
		r = min(r, a.ceiling)
	}
	return r
}

// interval returns the pacing interval at now, in nanoseconds.
func (a *aimd) interval(now int64) int64 {
	a.rate = a.at(now)
	return int64(math.Ceil(1e9 / a.rate))
}
