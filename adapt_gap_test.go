package headway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/headway-go/headway/ratelimitheader"
)

// A window's boundary is known to lie between a request's departure and
// its answer's arrival, plus the reset the answer states: what is left of
// the window is not spent after the earlier (the server may count it in
// the next window, on top of that window's quota), nor is the next
// window's quota before the later. A window never holds more than its
// quota.
func TestAWindowsLeftoverIsNotSpentWhereTheWindowMayHaveEnded(t *testing.T) {
	ms := int64(time.Millisecond)
	var m serverModel
	m.track()
	m.take(0, 1)
	m.observe(20*ms, 1, 1, &ratelimitheader.Signal{HasRemaining: true, Remaining: 3, Reset: 980 * time.Millisecond})
	m.window = true
	assert.Equal(t, 3.0, m.level(970*ms), "before the earliest boundary")
	assert.LessOrEqual(t, m.level(985*ms), 0.0, "the window may have ended at 980 ms")
	assert.Equal(t, 1000*ms, m.earliest(985*ms, 1), "the next window's quota from the latest boundary")
	assert.Equal(t, 4.0, m.level(1000*ms))
	m.correct(1000*ms, 1000*ms, 5) // corrected by an answer of another window
	assert.Equal(t, 4.0, m.level(1000*ms), "no more than the quota")

	// Stated to the second, the reset says nothing of the kind.
	var c serverModel
	c.track()
	c.take(0, 1)
	c.secondReset = true
	c.observe(20*ms, 1, 1, &ratelimitheader.Signal{HasRemaining: true, Remaining: 3, Reset: time.Second})
	c.window = true
	assert.Equal(t, 3.0, c.level(1010*ms))
}

// A window whose ends the server names (a global limit's retry_after)
// that proves wrong in use is learned again, never given up for a bucket:
// a cycle of two windows taken for one (demand that came every other
// window) shows as a throttle after fewer requests than the quota learned.
func TestAPreciseWindowProvedWrongIsLearnedAgain(t *testing.T) {
	for _, precise := range []bool{false, true} {
		w := learnedWindow{precise: precise, on: true, limit: 14, period: 2e9, minSpan: 2e9, quota: 14, agree: 2}
		w.inSent, w.inThr, w.inLimit = 8, 2, 14 // 6 went through: under half
		w.judge()
		if precise {
			assert.False(t, w.on || w.off, "learned again")
			assert.Zero(t, w.minSpan, "its length measured again")
		} else {
			assert.True(t, w.off, "a bucket's burst")
		}
	}
}

// A reset stated centuries ahead (a server's bug, or an epoch in the wrong
// unit) does not hold the model to it: reset instants only move on, so
// one such answer used to keep every later window from being seen, and
// the key from ever being idle.
func TestAResetOfCenturiesDoesNotHoldTheModel(t *testing.T) {
	ms := int64(time.Millisecond)
	var m serverModel
	m.track()
	m.take(0, 1)
	m.observe(20*ms, 1, 1, &ratelimitheader.Signal{HasRemaining: true, Remaining: 3, Reset: 200 * 365 * 24 * time.Hour})
	m.take(30*ms, 1)
	m.observe(50*ms, 2, 2, &ratelimitheader.Signal{HasRemaining: true, Remaining: 2, Reset: 950 * time.Millisecond})
	assert.Less(t, m.resetSeen, 2000*ms, "the reset of centuries was kept")
	assert.True(t, m.idle(int64(time.Hour)), "the model is idle an hour later")
}
