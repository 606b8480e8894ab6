package headway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// While a scope's global window is learned, a request past the quota
// counted waits for the answers before it, or for a while; whatever
// earliest lets go, take takes: a key that asked earliest and then was
// refused by take would ask again at once, for ever, under its lock.
func TestAScopeTakesWhatItsEarliestLetsGo(t *testing.T) {
	ms := int64(time.Millisecond)
	var sc scopeState
	sc.activate()
	// The first cycle: 3 departures, the third throttled, a wait to 1 s.
	for i := range 3 {
		_, ok := sc.take(int64(i)*ms, int64(i)*ms)
		require.True(t, ok)
	}
	sc.answered(1, 20*ms)
	sc.answered(2, 20*ms)
	sc.throttled(1000*ms, 3)
	require.True(t, sc.learning.Load())
	// The next cycle: the 2 the first let through, then one at a time.
	for i := range 2 {
		_, ok := sc.take(1000*ms+int64(i), 1000*ms+int64(i))
		require.True(t, ok, "the quota counted")
	}
	at := 1001 * ms
	assert.Greater(t, sc.earliest(at), at, "held for the answers")
	_, ok := sc.take(at, at)
	assert.False(t, ok, "held for the answers")
	// No answer comes: once the hold is over, earliest and take agree.
	late := sc.earliest(at)
	assert.Equal(t, late, sc.earliest(late))
	_, ok = sc.take(late, late)
	assert.True(t, ok, "what earliest lets go, take takes")
}
