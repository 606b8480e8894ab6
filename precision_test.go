package headway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimitheader"
)

// A reset is read to the second when it is a whole number of seconds, or
// names a whole second of the server's clock (an epoch, a date), until the
// host states one to the millisecond: from then on its whole ones are
// precise too (Discord's Reset-After of 1.000, or 0.734 that happens to
// end on a whole second of the clock it was read against: the spiral
// tail of TestTheRoutesOfATokenShareItsGlobalWindow at zero jitter).
func TestAResetIsReadAsPreciseAsItsHostStatesThem(t *testing.T) {
	srv := time.Date(2026, 3, 10, 12, 0, 0, 266e6, time.UTC) // + 0.734 s: a whole second
	var h hostState
	assert.True(t, h.resetPrecision(time.Second, srv), "1.000, nothing stated to the ms yet")
	assert.True(t, h.resetPrecision(734*time.Millisecond, srv), "a whole instant, nothing stated to the ms yet")
	assert.False(t, h.resetPrecision(980*time.Millisecond, srv), "to the millisecond")
	assert.False(t, h.resetPrecision(734*time.Millisecond, srv), "0.734 to a whole instant, on a host of ms")
	assert.False(t, h.resetPrecision(time.Second, srv), "1.000 on a host of ms")

	// An epoch in whole seconds read against a clock with nanoseconds is
	// no evidence: its instant is whole.
	var e hostState
	assert.True(t, e.resetPrecision(time.Second-266e6-1, srv.Add(1)), "an epoch")
	assert.True(t, e.resetPrecision(time.Second, srv), "still read to the second")
}

// A window whose stated reset passed with no departure since refills in
// full, but not where its next boundary may already have passed (its
// gap): a request there is held until that boundary, or the server counts
// it in the next window, whose quota the model then spends again.
func TestAStaleResetKeepsTheNextBoundarysGap(t *testing.T) {
	ms := int64(time.Millisecond)
	var m serverModel
	m.track()
	m.take(0, 1)
	m.observe(20*ms, 1, 1, &ratelimitheader.Signal{HasRemaining: true, Remaining: 4, Reset: 980 * time.Millisecond})
	m.window, m.period = true, 1000*ms
	// The reset at 1000 ms passed; nothing left since.
	assert.Equal(t, 5.0, m.level(1500*ms), "refilled")
	assert.Equal(t, 1500*ms, m.earliest(1500*ms, 1))
	assert.LessOrEqual(t, m.level(1990*ms), 0.0, "the boundary at 2000 ms may have passed at 1980 ms")
	assert.Equal(t, 2000*ms, m.earliest(1990*ms, 1), "held until the next boundary")
	assert.Equal(t, 5.0, m.level(2000*ms))
}

// A window's length is the span between two of its resets; a span over a
// window no answer came in (demand every other window) is a multiple of
// the length known, not a new length.
func TestAWindowSeenEveryOtherWindowKeepsItsLength(t *testing.T) {
	ms := int64(time.Millisecond)
	m := serverModel{period: 1000 * ms}
	assert.Equal(t, 1000*ms, m.periodFrom(1998*ms))
	assert.Equal(t, 1000*ms, m.periodFrom(3004*ms))
	assert.Equal(t, 1010*ms, m.periodFrom(1010*ms), "measured again")
	assert.Equal(t, 1700*ms, m.periodFrom(1700*ms), "no multiple: the server changed")
}

// Answers of one window name its end at their arrivals plus their resets,
// apart by their flights' jitter: each lies between its departure plus the
// reset and that, and the window's answers all name its end. Compared at
// the arrivals to 10 ms, an answer 15 ms off was taken for another
// window's, its remaining did not count as the window's least, and the
// model let a sixth request into a window of 5 (a trace of the Discord
// routes, 32 workers, 20 ms of jitter).
func TestAnswersOfOneWindowWithJitteredFlights(t *testing.T) {
	ms := int64(time.Millisecond)
	var m serverModel
	m.take(0, 1)
	m.observe(20*ms, 1, 1, &ratelimitheader.Signal{HasRemaining: true, Remaining: 4, Reset: 980 * time.Millisecond})
	m.take(30*ms, 2)
	m.observe(52*ms, 2, 2, &ratelimitheader.Signal{HasRemaining: true, Remaining: 3, Reset: 970 * time.Millisecond})
	require.True(t, m.window, "a reset that stays put")
	// The next window: five leave as it turns, and their answers come
	// back in another order, their flights 16 to 38 ms.
	for _, d := range []struct {
		seq uint64
		at  int64
	}{{3, 1040}, {4, 1040}, {5, 1062}, {6, 1070}, {7, 1077}} {
		require.GreaterOrEqual(t, m.level(d.at*ms), 1.0, "departure %d", d.seq)
		m.take(d.at*ms, d.seq)
	}
	answer := func(now int64, seq uint64, left int64, reset int64) {
		m.observe(now*ms, seq, 7, &ratelimitheader.Signal{HasRemaining: true, Remaining: left, Reset: time.Duration(reset) * time.Millisecond})
	}
	answer(1062, 4, 3, 960)
	answer(1078, 3, 4, 960)
	answer(1093, 6, 1, 930) // names 2023, 15 ms before 2038
	answer(1094, 5, 2, 938)
	assert.LessOrEqual(t, m.level(1094*ms), 0.0, "7 unanswered, and 6 had 1 left: none")
}

// Until its first global throttle, a scope lets rampStart departures be
// unanswered, one more for every rampGrowth answers; what an answer lets go
// leaves after it; the first global throttle ends the ramp.
func TestAScopeRampsUpUntilItsFirstGlobalThrottle(t *testing.T) {
	ms := int64(time.Millisecond)
	sc := &scopeState{}
	sc.activate()
	var seqs []uint64
	for range rampStart {
		seq, ok := sc.take(0, 0)
		require.True(t, ok)
		seqs = append(seqs, seq)
	}
	_, ok := sc.take(0, 0)
	assert.False(t, ok, "rampStart unanswered")
	for _, seq := range seqs {
		sc.answered(seq, 20*ms, 20*ms)
	}
	assert.Equal(t, 20*ms+1, sc.earliest(20*ms), "after the answers of that instant")
	for range rampStart + 1 {
		seq, ok := sc.take(21*ms, 21*ms)
		require.True(t, ok)
		seqs = append(seqs, seq)
	}
	_, ok = sc.take(21*ms, 21*ms)
	assert.False(t, ok, "one more for %d answers", rampGrowth)
	sc.throttled(1000*ms, 1040*ms, seqs[len(seqs)-1])
	_, ok = sc.take(21*ms, 21*ms)
	assert.True(t, ok, "no ramp after the first global throttle")
}

// Windows are set in round numbers: a cycle measured to within the jitter
// of the answers is taken to the whole second, or the 100 ms, near it.
func TestAWindowsLengthIsRound(t *testing.T) {
	ms := int64(time.Millisecond)
	for span, want := range map[int64]int64{993: 1000, 1040: 1000, 960: 1000, 940: 940, 1995: 2000, 497: 500, 488: 490, 60020: 60000, 123: 120} {
		assert.Equal(t, want*ms, roundPeriod(span*ms), "%d ms", span)
	}
}

// Throttles of a window in use name its ends late by their answers'
// flights (20 to 120 ms here): the length, set from the shortest cycles,
// may be short by as much (990 ms for 1 s), and boundaries counted from
// one end drift early until a window's requests are throttled. Measured
// again over long spans, between the middles of the spans each end lies
// in, the length converges; a span that is no whole number of windows of
// the length known (a length far off) measures nothing.
func TestAWindowInUseIsMeasuredAgainOverLongSpans(t *testing.T) {
	ms := int64(time.Millisecond)
	w := learnedWindow{on: true, limit: 10, period: 990 * ms, b: &windowBounds{anchor: 3110 * ms, anchorLo: 3000 * ms}}
	flight := []int64{110, 25, 80, 40, 120, 60, 20, 95}
	for k := int64(4); k <= 30; k++ {
		end := k * 1000 * ms
		w.refine(end, end+flight[k%8]*ms)
		if k >= 12 {
			assert.InDelta(t, 1000*ms, w.period, float64(5*ms), "after %d windows", k-3)
		}
	}
	w.period = 940 * ms
	w.refine(19495*ms, 19515*ms) // 17.5 windows of 940 ms
	assert.Equal(t, 940*ms, w.period, "no whole number of windows")
}
