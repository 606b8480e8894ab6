package fakeserver

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An Observer counts a request as sent inside a known wait only once the
// rejection that named the wait has been handed back, and only before the
// wait ends; a global wait covers every route of the token.
func TestObserverCountsOnlyWaitsTheClientHadRead(t *testing.T) {
	clk := newClock()
	s := New(Config{Algorithm: FixedWindow, Limit: 1, Window: 2 * time.Second, Dialect: RetryAfterDate{},
		TellWaits: true, Now: clk.Now, Key: func(r *http.Request) string { return r.URL.Path },
		Global: GlobalLimit{Algorithm: FixedWindow, Limit: 5, Window: 10 * time.Second}})
	o := NewObserver(s, s.Transport())
	send := func(path string) int {
		req, err := http.NewRequest(http.MethodGet, "http://api.test"+path, nil)
		require.NoError(t, err)
		resp, err := o.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	clk.Advance(500 * time.Millisecond)
	require.Equal(t, http.StatusOK, send("/a"))
	require.Equal(t, http.StatusTooManyRequests, send("/a")) // told: until 2s
	assert.Zero(t, o.Known(), "the first rejection was not known when it was sent")
	require.Equal(t, http.StatusOK, send("/b")) // another key: not inside /a's wait
	assert.Zero(t, o.Known())
	require.Equal(t, http.StatusTooManyRequests, send("/a"))
	assert.Equal(t, int64(1), o.Known())
	clk.Advance(1500 * time.Millisecond) // the window ends at 2s
	require.Equal(t, http.StatusOK, send("/a"))
	assert.Equal(t, int64(1), o.Known())
	require.Equal(t, http.StatusTooManyRequests, send("/c")) // the token's sixth in 10 s
	require.Equal(t, http.StatusTooManyRequests, send("/d")) // /d inside the token's wait
	assert.Equal(t, int64(2), o.Known())
	assert.Equal(t, 4, o.Throttled())
	// Two throttles of /a left in [0, 2s), the window that holds the
	// start, and two of the token in [2s, 4s).
	assert.Equal(t, 2, o.WorstWindow(t0))
	assert.Equal(t, 0, o.WorstWindow(t0.Add(2*time.Second)))
}

// WorstWindow counts each key's throttles apart: two routes throttled
// once each in a window make one a window.
func TestObserverCountsThrottlesByKey(t *testing.T) {
	clk := newClock()
	s := New(Config{Algorithm: FixedWindow, Limit: 1, Window: 2 * time.Second, Dialect: RetryAfterDate{},
		TellWaits: true, Now: clk.Now, Key: func(r *http.Request) string { return r.URL.Path }})
	o := NewObserver(s, s.Transport())
	clk.Advance(2500 * time.Millisecond)
	for _, path := range []string{"/a", "/b", "/a", "/b"} {
		req, err := http.NewRequest(http.MethodGet, "http://api.test"+path, nil)
		require.NoError(t, err)
		resp, err := o.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, 2, o.Throttled())
	assert.Equal(t, 1, o.WorstWindow(t0))
}
