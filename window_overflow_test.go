package headway

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A wait so long that its end saturates (a global retry_after of
// centuries, to the millisecond) is a cycle like any other: the spans
// between ends must not overflow into a negative shortest cycle, after
// which no window is ever learned again.
func TestASaturatedWaitDoesNotStopTheWindowsLearning(t *testing.T) {
	ms := int64(time.Millisecond)
	var w learnedWindow
	var sent uint64
	cycle := func(at, end int64) {
		first := sent
		for range 24 {
			w.take(at)
			sent++
		}
		for d := uint64(1); d <= 24; d++ {
			if d > 20 {
				w.unheard(sent, 24-d+1)
				w.throttledIn(end, end, first+d, sent)
			}
			w.answered(first + d)
		}
	}
	cycle(0, 1000*ms)
	cycle(1000*ms, math.MaxInt64) // saturated: satAdd(now, wait)
	end := 2000 * ms
	for range 6 {
		if w.on {
			break
		}
		cycle(end-1000*ms, end)
		end += 1000 * ms
	}
	require.GreaterOrEqual(t, w.minSpan, int64(0), "the shortest cycle")
	require.True(t, w.on, "cycles of a second that agree")
	assert.Equal(t, 1000*ms, w.period)
	assert.Equal(t, 20.0, w.limit)
}
