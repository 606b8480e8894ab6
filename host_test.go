package headway

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDatesAreReadWhileTheHostLearnsItsClock: past a key's 64th answer,
// its answers that say nothing else are read for their Date while its
// host learns its clock, each of them, until the offset is known (a host
// that never sent a Date costs a look-up in 64 answers: see readsDate).
func TestDatesAreReadWhileTheHostLearnsItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			// Every Date in one second: the bounds stay a second wide,
			// and only datesMost Dates make the offset known.
			h := http.Header{}
			h.Set("Date", time.Now().Truncate(time.Second).UTC().Format(http.TimeFormat))
			return http.StatusOK, h
		}}
		tr := New(rt)
		h := tr.hosts.get("api.test")
		defer tr.hosts.put("api.test", h)
		for i := range datesMost + 20 {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			require.NoError(t, err)
			resp.Body.Close()
			if i+1 < datesMost {
				require.Equal(t, int64(1), tr.learningHosts.Load(), "the host learns, after answer %d", i+1)
			}
		}
		_, _, ok := h.offsetBounds()
		require.True(t, ok)
		h.mu.Lock()
		n := h.offset.n
		h.mu.Unlock()
		assert.Equal(t, datesMost, n, "every answer read until the offset was known")
		assert.False(t, h.wantDates.Load())
		assert.Zero(t, tr.learningHosts.Load(), "no host learns any more")
	})
}
