package headway

import (
	"math"
	"time"
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
type serverModel struct {
	known bool // a response has stated a remaining quota

	tokens  float64 // requests left at time at, less those sent since
	at      int64
	cap     float64 // the most the bucket has been seen to hold
	resetAt int64   // when an emptied window refills to cap, if rate is 0

	rate       float64 // requests per nanosecond coming back; 0 if none seen
	rateStated bool    // rate comes from a policy, not from measurement

	// The refill measurement runs from an anchor response: the remaining
	// it stated and the admitted responses received up to it. full notes
	// that the bucket was seen full since (refill may have been wasted);
	// held, that the model held a request back since (demand was there).
	anchorAt       int64
	anchorLeft     float64
	anchorAdmitted uint64
	full, held     bool

	admitted  uint64 // responses received that the server admitted
	answered  uint64 // responses received
	syncedSeq uint64 // the newest departure a response has described

	spread bool  // spread what remains evenly instead of spending it at once
	nextAt int64 // with spread: the next departure, at the earliest
}

// minMeasureSpan is the shortest span between two responses from which a
// refill rate is measured: remaining counts are whole numbers, and the
// order of responses is not quite the order the server counted them in.
const minMeasureSpan = int64(500 * time.Millisecond)

// measureRefill turns on the measurement of an unstated refill rate from
// successive responses. It is off: the estimate is not yet good enough to
// pace on (see the issue notes), and a key without a stated rate spends
// what remains, then waits for the stated reset.
const measureRefill = false

// minRate is the slowest refill the model believes in, per nanosecond (one
// request in 10,000 s); below it the server is taken to reset windows
// instead.
const minRate = 1e-13

// observe takes in what a response to departure seq said at now. sent is
// the number of departures so far.
func (m *serverModel) observe(now int64, seq, sent uint64, sig *Signal) {
	if sig.Limit > 0 && sig.Period > 0 && !sig.TooLong {
		// A stated policy: Limit requests per Period.
		m.rate, m.rateStated = float64(sig.Limit)/float64(sig.Period), true
	}
	m.answered++
	if !sig.Throttled {
		m.admitted++
	} else if !m.rateStated && m.rate > 0 {
		m.rate *= 0.8 // measured too high: the server disagrees
	}
	if m.rate < minRate {
		m.rate = 0
	}
	if !sig.HasRemaining || seq < m.syncedSeq {
		return // nothing to learn, or older news than we have
	}
	left := float64(sig.Remaining)
	m.cap = max(m.cap, left+1)
	if left+1 >= m.cap {
		m.full = true
	}
	if !m.known {
		m.anchorAt, m.anchorLeft, m.anchorAdmitted = now, left, m.admitted
	} else if measureRefill && !m.rateStated && now-m.anchorAt >= minMeasureSpan {
		m.measure(now, left)
		m.anchorAt, m.anchorLeft, m.anchorAdmitted = now, left, m.admitted
		m.full, m.held = left+1 >= m.cap, false
	}
	m.known, m.syncedSeq = true, seq
	// What the server has left, less what is still unanswered: the server
	// may count any of those after this one (responses do not come back in
	// the order the server counted them).
	m.tokens, m.at = left-float64(sent-min(m.answered, sent)), now
	if sig.Reset > 0 {
		m.resetAt = satAdd(now, int64(sig.Reset))
	}
}

// measure updates the refill rate from the anchor to a response that says
// left remain at now: what came back is what is left now, less what was
// left then, plus what the server admitted in between.
func (m *serverModel) measure(now int64, left float64) {
	span := float64(now - m.anchorAt)
	came := left - m.anchorLeft + float64(m.admitted-m.anchorAdmitted)
	switch {
	case m.full && m.held:
		// The bucket filled up while requests were held back: the refill
		// is faster than the pace we kept. Probe upwards; what remains
		// shows whether it holds.
		m.rate = max(2*m.rate, came/span)
	case m.full:
		m.rate = max(m.rate, came/span) // a lower bound only
	case came < 1:
		m.rate = 0 // nothing came back: a fixed window, which resets instead
	case m.rate == 0:
		m.rate = came / span
	default:
		m.rate = 0.5*m.rate + 0.5*came/span
	}
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
	} else if m.resetAt > 0 && now >= m.resetAt && t < m.cap {
		t = m.cap
	}
	return t
}

// earliest returns the earliest instant at or after now at which n more
// requests may leave.
func (m *serverModel) earliest(now int64, n float64) int64 {
	if !m.known {
		return now
	}
	d := now
	if m.spread {
		d = max(d, m.nextAt)
	}
	// With a refill, keep one request in reserve (if the bucket holds two):
	// responses arrive in another order than the server counted them, and
	// the reserve absorbs that.
	need := n
	if m.rate > 0 && m.cap >= 2 {
		need++
	}
	level := m.level(d)
	switch {
	case level >= need:
		return d
	case m.rate > 0:
		return satAdd(d, int64(math.Ceil((need-level)/m.rate)))
	case m.resetAt > d:
		if n > m.cap {
			return math.MaxInt64
		}
		return m.resetAt
	case n <= 1 && level > -1:
		// Nothing says when it comes back: one request at a time finds
		// out.
		return d
	}
	return satAdd(d, int64(time.Second))
}

// take records one departure at now.
func (m *serverModel) take(now int64) {
	if !m.known {
		return
	}
	level := m.level(now)
	m.tokens, m.at = level-1, max(m.at, now)
	if m.resetAt > 0 && now >= m.resetAt {
		m.resetAt = 0 // the reset is taken into tokens
	}
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

// aimd adapts a rate to bare throttles: a multiplicative cut on a 429 that
// names no wait, then a cubic climb back (CUBIC, as in the AWS SDKs'
// adaptive retry mode), never above ceiling.
type aimd struct {
	active   bool
	rate     float64 // requests per second now
	wmax     float64 // the rate at the last cut
	cutAt    int64   // when the last cut happened
	cutSeq   uint64  // departures sent before the last cut
	ceiling  float64 // requests per second; 0 means none
	lastRate float64 // the rate last handed to the bucket
}

const (
	aimdBeta  = 0.7
	aimdScale = 0.4 // C of CUBIC, in requests per second per second³
	aimdFloor = 0.5 // requests per second
)

// throttled cuts the rate after a bare throttle of a request sent as
// departure seq, at now; firstAt is when the key sent its first request.
// Only a request sent after the last cut can say that the cut rate is still
// too high, so the rest change nothing.
func (a *aimd) throttled(now int64, seq, sent uint64, firstAt int64) {
	if a.active && seq <= a.cutSeq {
		return
	}
	measured := a.rate
	since, from := a.cutAt, a.cutSeq
	if !a.active {
		since, from = firstAt, 0
	}
	if span := float64(now-since) / 1e9; span > 0 {
		// What was really sent since the last cut (or since the start),
		// over at least one second so that a burst does not count as a rate.
		m := float64(sent-from) / max(span, 1)
		if !a.active || m < measured {
			measured = m
		}
	}
	if a.ceiling > 0 {
		measured = min(measured, a.ceiling)
	}
	a.active = true
	a.wmax = max(measured, aimdFloor)
	a.rate = max(a.wmax*aimdBeta, aimdFloor)
	a.cutAt, a.cutSeq = now, sent
}

// idle reports whether the last cut is long enough ago to be forgotten.
func (a *aimd) idle(now int64) bool {
	return !a.active || now-a.cutAt > int64(10*time.Minute)
}

// at returns the rate at now, on the cubic curve since the last cut.
func (a *aimd) at(now int64) float64 {
	t := float64(now-a.cutAt) / 1e9
	k := math.Cbrt(a.wmax * (1 - aimdBeta) / aimdScale)
	r := aimdScale*math.Pow(t-k, 3) + a.wmax
	r = max(r, a.wmax*aimdBeta, aimdFloor)
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
