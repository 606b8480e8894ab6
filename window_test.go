package headway

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Throttles whose waits end a second apart, after 20 requests each time,
// are a window of 20 a second: spend 20, then wait for the boundary.
func TestLearnedWindowFromTheSpacingOfThrottles(t *testing.T) {
	ms := int64(time.Millisecond)
	var w learnedWindow
	// Cycle 0: a burst; #21 to #28 throttled, the wait ends at 1 s.
	for _, seq := range []uint64{23, 21, 28} {
		w.throttled(1000*ms+int64(seq)*ms/10, seq, 28) // the ends jitter by the flight
	}
	// Cycle 1: #29 to #48 went through, #49 throttled, wait until 2 s.
	w.throttled(2003*ms, 50, 52)
	w.throttled(2001*ms, 49, 52)
	assert.False(t, w.on, "one cycle is a guess")
	// Cycle 2: as many, as long.
	w.throttled(3002*ms, 73, 75)
	require.True(t, w.on)
	assert.Equal(t, 20.0, w.limit)
	assert.Equal(t, 1000*ms, w.period, "to the nearest 10 ms")
	assert.Equal(t, 3002*ms, w.earliest(2500*ms), "nothing before the boundary")
	for i := range int64(20) {
		at := 3002*ms + i*ms
		require.Equal(t, at, w.earliest(at), "request %d of the window", i)
		w.take(at)
	}
	assert.Equal(t, 4002*ms, w.earliest(3100*ms), "the 21st waits for the next boundary")
	// A throttle while in use: one fewer from the boundary it names.
	w.throttled(5003*ms, 120, 121)
	assert.Equal(t, 19.0, w.limit)
	assert.Equal(t, 5003*ms, w.earliest(4500*ms))
}

// Routes that the server says share a bucket share its model: /a spends
// the bucket, and /b, whose own answers never came, waits for its reset.
func TestRoutesOfOneBucketShareAModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		left := map[string]int{"ab": 2, "c": 2}
		rt := &adaptRT{script: func(_ int, req *http.Request) (int, http.Header) {
			mu.Lock()
			defer mu.Unlock()
			b := "c"
			if req.URL.Path != "/c" {
				b = "ab"
			}
			h := http.Header{}
			h.Set("X-Ratelimit-Bucket", b)
			h.Set("X-Ratelimit-Reset-After", "1.5")
			if left[b] == 0 {
				h.Set("X-Ratelimit-Remaining", "0")
				h.Set("Retry-After", "2")
				return http.StatusTooManyRequests, h
			}
			left[b]--
			h.Set("X-Ratelimit-Remaining", strconv.Itoa(left[b]))
			return http.StatusOK, h
		}}
		tr := New(rt)
		get := func(path string) int {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test"+path))
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		start := time.Now()
		assert.Equal(t, 200, get("/a")) // 1 left in ab
		assert.Equal(t, 200, get("/c")) // 1 left in c
		assert.Equal(t, 200, get("/b")) // /b is ab's too: 0 left
		assert.Equal(t, 200, get("/c")) // c's own bucket: no wait
		assert.Less(t, time.Since(start), time.Second)
		mu.Lock()
		left["ab"] = 2 // the reset
		mu.Unlock()
		assert.Equal(t, 200, get("/a"))
		assert.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "/a waited for ab's reset")
		assert.Len(t, rt.log(), 5, "no request was throttled")
	})
}

// Dates are read from every response, even one that says nothing else,
// until the offset of the server's clock is known to 50 ms; then no more.
func TestTheClockOffsetIsLearnedFromEveryDateUntilKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const skew = 30*time.Second + 300*time.Millisecond
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			time.Sleep(20 * time.Millisecond) // the flight
			h := http.Header{}
			h.Set("Date", time.Now().Add(skew-10*time.Millisecond).UTC().Format(http.TimeFormat))
			return http.StatusOK, h
		}}
		tr := New(rt)
		for range 100 {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			require.NoError(t, err)
			resp.Body.Close()
			time.Sleep(37 * time.Millisecond) // the Dates tick at every phase
		}
		h := tr.hosts.get("api.test")
		defer tr.hosts.put("api.test", h)
		off, ok := h.clockOffset()
		require.True(t, ok)
		assert.InDelta(t, float64(skew), float64(off), float64(50*time.Millisecond))
		assert.LessOrEqual(t, off, skew, "never ahead of the server")
		assert.False(t, h.wantDates.Load())
	})
}

// A bucket whose waits end on whole seconds (a Retry-After date rounded
// up) looks like a window until the quota goes out at once: throttled
// early in the window, it is a bucket's burst, and learning stops.
func TestALearnedWindowThrottledEarlyIsABucket(t *testing.T) {
	ms := int64(time.Millisecond)
	w := learnedWindow{on: true, limit: 40, period: 1000 * ms, end: 1000 * ms}
	for i := range int64(12) {
		w.take(1000*ms + i)
	}
	w.throttled(2000*ms, 11, 12) // the 11th of the window
	assert.False(t, w.on)
	w.prevEnd, w.agree = 0, 5
	w.throttled(3000*ms, 20, 21)
	assert.False(t, w.on, "never again")
}
