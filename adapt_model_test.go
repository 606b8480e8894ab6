package headway

import (
	"testing"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fixed window of 30 per 3 s, stated as remaining and a reset that stays
// put: bounds that assume a refill contradict each other, so the model
// takes the server for a window, spends it, then waits for the boundary,
// one window length after the one it saw pass.
func TestServerModelInfersAFixedWindow(t *testing.T) {
	ms := int64(time.Millisecond)
	var m serverModel
	seq := uint64(0)
	send := func(at int64) uint64 { seq++; m.take(at, seq); return seq }
	answer := func(at int64, s uint64, left int64, reset time.Duration) {
		m.observe(at, s, seq, &ratelimitheader.Signal{HasRemaining: true, Remaining: left, Reset: reset})
	}
	// The first window ends at 3 s; the client starts at 0.
	for i := range int64(30) {
		s := send(i * 10 * ms)
		answer(i*10*ms+20*ms, s, 29-i, 3*time.Second-time.Duration(i*10*ms+20*ms))
	}
	require.True(t, m.window, "a quota that only comes back at its reset")
	assert.Zero(t, m.rate)
	// Nothing comes back before the boundary.
	assert.Equal(t, 3000*ms, m.earliest(400*ms, 1))
	// The next window: 30 again, and its reset a period on.
	for i := range int64(30) {
		at := 3000*ms + i*ms
		require.Equal(t, at, m.earliest(at, 1), "request %d of the window", i)
		s := send(at)
		answer(at+20*ms, s, 29-i, time.Duration(6000*ms-at-20*ms))
	}
	assert.Equal(t, 3000*ms, m.period)
	assert.Equal(t, 6000*ms, m.earliest(3100*ms, 1), "the 31st waits for the boundary")
	// Spending the third window, the model knows the fourth's boundary
	// before any answer names it.
	for i := range int64(30) {
		send(6000*ms + i*ms)
	}
	assert.Equal(t, 9000*ms, m.earliest(6100*ms, 1))
}

// Answers that come back in another order than the server counted them
// still show a window: three requests that left together drain it from 4
// to 2, and their answers, with one reset instant, come back as 2, 3, 4.
// (The model used to look for a drain in the order of the answers only,
// took the contradiction of its bounds for a slow bucket, 0.9 a second,
// and then sent one request a window, never to see a drain again:
// TestSparseShapes/discord-routes-global fell to 0.3-0.56.) The answers of
// a bucket, out of order, name reset instants 1/rate apart: no window.
func TestServerModelInfersAWindowFromAnswersOutOfOrder(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		name   string
		resets [3]int64 // the reset instants the three answers state, ms
		window bool
	}{
		{"window", [3]int64{3021, 3022, 3025}, true},
		{"bucket 5/s", [3]int64{3021, 2821, 2621}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m serverModel
			seq := uint64(0)
			send := func(at int64) uint64 { seq++; m.take(at, seq); return seq }
			answer := func(at int64, s uint64, left int64, resetAt int64) {
				m.observe(at, s, seq, &ratelimitheader.Signal{HasRemaining: true, Remaining: left, Reset: time.Duration(resetAt - at)})
			}
			// One request in each of the first two windows (5 a second).
			s := send(23 * ms)
			answer(43*ms, s, 4, 1021*ms)
			s = send(1027 * ms)
			answer(1050*ms, s, 4, 2025*ms)
			// Three at once; the server counts them 4, 3, 2 left; the answers
			// come back last first.
			a, b, d := send(2024*ms), send(2024*ms), send(2024*ms)
			answer(2045*ms, d, 2, c.resets[0]*ms)
			answer(2046*ms, b, 3, c.resets[1]*ms)
			answer(2049*ms, a, 4, c.resets[2]*ms)
			assert.Equal(t, c.window, m.window)
			if c.window {
				assert.Zero(t, m.rate)
			}
		})
	}
}

// Quota that trickles back well before the window's end shows a bucket
// after all: the model measures a rate again.
func TestServerModelLeavesAWindowForATrickle(t *testing.T) {
	ms := int64(time.Millisecond)
	m := serverModel{known: true, cap: 10, window: true, resetSeen: 5000 * ms, resetAt: 5000 * ms}
	m.track()
	m.take(100*ms, 1)
	m.observe(120*ms, 1, 1, &ratelimitheader.Signal{HasRemaining: true, Remaining: 5, Reset: 4 * time.Second})
	m.take(600*ms, 2)
	m.observe(620*ms, 2, 2, &ratelimitheader.Signal{HasRemaining: true, Remaining: 9, Reset: 400 * time.Millisecond})
	assert.False(t, m.window)
}

// The margin grows with each prediction the server proves wrong and
// shrinks after a run of right ones; it holds back requests beyond the
// one reserve only while the model refills.
func TestServerModelMarginFollowsItsErrors(t *testing.T) {
	m := serverModel{known: true, cap: 40, rate: 10e-9, tokens: 20}
	m.judge(true, 0)
	m.judge(false, -3)
	assert.Equal(t, 2.0, m.margin)
	m.judge(false, -1) // within the rounding of a count
	assert.Equal(t, 2.0, m.margin)
	// With 20 left, two for the reserve and the margin... at most 17 go
	// at once, where 18 would with no margin.
	assert.Equal(t, int64(0), m.earliest(0, 17))
	assert.Greater(t, m.earliest(0, 18), int64(0))
	for range marginDecay {
		m.judge(false, 0)
	}
	assert.Equal(t, 1.0, m.margin)
	// It never grows past a quarter of the bucket.
	for range 100 {
		m.judge(true, 0)
	}
	assert.Equal(t, 10.0, m.margin)
}

// Requests that leave within groupSpan of each other may be counted in
// any order: an answer above its own prediction but not the group's says
// nothing, and one below the group's corrects the model once.
func TestServerModelGroupsDeparturesCloseInTime(t *testing.T) {
	ms := int64(time.Millisecond)
	m := serverModel{known: true, cap: 10, tokens: 10}
	m.track()
	m.take(0, 1)
	m.take(2*ms, 2) // 2 ms later: maybe counted first
	// #2 was counted first (9 left after it), #1 second (8).
	m.observe(20*ms, 1, 2, &ratelimitheader.Signal{HasRemaining: true, Remaining: 9})
	m.observe(21*ms, 2, 2, &ratelimitheader.Signal{HasRemaining: true, Remaining: 8})
	assert.InDelta(t, 8, m.level(21*ms), 1e-9, "the model neither gained nor lost a request")
}

// An answer that overtook requests sent before it, not yet answered, may
// have been counted before them: what it says above the prediction is no
// news until they are answered. (On a loaded machine requests 20 ms
// apart reached the server in the other order, and the model rose by
// three, then met three throttles.)
func TestServerModelAnAnswerThatOvertookOthersLiftsNothing(t *testing.T) {
	ms := int64(time.Millisecond)
	m := serverModel{known: true, cap: 10, tokens: 6}
	m.track()
	for i := range uint64(4) {
		m.take(int64(i)*20*ms, i+1) // 50 ms apart: not a group
	}
	// #4 reached the server first: 5 left after it.
	m.observe(100*ms, 4, 4, &ratelimitheader.Signal{HasRemaining: true, Remaining: 5})
	assert.InDelta(t, 2, m.level(100*ms), 1e-9)
	m.observe(101*ms, 1, 4, &ratelimitheader.Signal{HasRemaining: true, Remaining: 4})
	m.observe(102*ms, 2, 4, &ratelimitheader.Signal{HasRemaining: true, Remaining: 3})
	m.observe(103*ms, 3, 4, &ratelimitheader.Signal{HasRemaining: true, Remaining: 2})
	assert.LessOrEqual(t, m.level(103*ms), 2.0)
}

// An answer that came back slower than the fastest by more than
// groupSpan may have reached the server after departures that left
// within that much after it (a connection still opening held it), so its
// prediction is the level after them too. Taken alone, its lower count
// made a wrong prediction, the model was lowered by it, and a margin kept
// back 3 of 100 requests a window (GitHub's fixed windows, the first
// flight spread over 100 ms: a fourth window for the last 3 requests).
func TestServerModelASlowAnswerIsComparedWithWhatLeftMeanwhile(t *testing.T) {
	ms := int64(time.Millisecond)
	m := serverModel{known: true, cap: 10, tokens: 10}
	m.track()
	m.take(0, 1)
	m.take(30*ms, 2)
	m.take(60*ms, 3)
	// #2 and #3 came back in 20 ms; #1, held 70 ms on its way, was counted
	// after them: 7 left.
	m.observe(50*ms, 2, 3, &ratelimitheader.Signal{HasRemaining: true, Remaining: 9})
	m.observe(80*ms, 3, 3, &ratelimitheader.Signal{HasRemaining: true, Remaining: 8})
	m.observe(90*ms, 1, 3, &ratelimitheader.Signal{HasRemaining: true, Remaining: 7})
	assert.InDelta(t, 7, m.level(90*ms), 1e-9, "the model neither gained nor lost a request")
	assert.Zero(t, m.margin, "no prediction was wrong")
}

// A window whose boundary may come up to gap before the end stated is
// held for that gap only if the gap is shorter than the window: answers
// of a bucket spread over 100 ms by opening connections measured a
// "period" of 100 ms with a gap of 250 ms, the model was empty at every
// instant, and its key armed its timer every 100 ms for good with
// nothing sent (OpenAI's bucket, 32 workers: a hang).
func TestServerModelAGapLongerThanItsWindowHoldsNothing(t *testing.T) {
	ms := int64(time.Millisecond)
	m := serverModel{known: true, cap: 20, window: true, resetAt: 1000 * ms, resetSeen: 1000 * ms,
		period: 100 * ms, gap: int32(250 * ms), gapSet: true}
	assert.Equal(t, 20.0, m.level(5000*ms))
	assert.Equal(t, int64(5000*ms), m.earliest(5000*ms, 1))
}

// With no refill known and nothing left, one request finds out, but not
// at once: a while after the last departure.
func TestServerModelProbesAWhileAfterTheLastDeparture(t *testing.T) {
	m := serverModel{known: true, cap: 10, tokens: 1}
	m.take(0, 1)
	assert.Equal(t, probeGap, m.earliest(0, 1))
}

// After a pause, what went out is no bucket's burst on top of a rate when
// the server counts windows: the cut keeps at least what went through
// since the last cut over the time since (20 per 2 s here), where the old
// measure took the 20 for the burst and kept 1 a second.
func TestAIMDKeepsWhatACycleLetThrough(t *testing.T) {
	s := int64(time.Second)
	var a aimd
	a.throttled(0, 21, 28, 0, 0, false, false) // the first burst: 20 through
	require.Equal(t, 27.0, a.c.burst)
	// 2 s later: 20 more went through after the pause, in 0.4 s.
	a.throttled(2*s, 49, 52, 20, 0.4, true, true)
	assert.GreaterOrEqual(t, a.wmax, 10.0*0.99, "20 per 2 s")
}
