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

// Throttles whose waits end a second apart, after 20 requests went through
// each time, are a window of 20 a second: spend 20, then wait for the
// boundary. The requests of a cycle leave together and reach the server in
// any order, so the throttled ones are any of them, the first to leave
// among them too: what went through is counted, not read from which was
// throttled. (A cycle whose first departure was throttled used to count
// as one that let nothing through, and the window learned 1 a second.)
func TestLearnedWindowFromTheSpacingOfThrottles(t *testing.T) {
	ms := int64(time.Millisecond)
	var w learnedWindow
	var sent uint64
	send := func(n int, at int64) uint64 {
		first := sent
		for range n {
			w.take(at)
			sent++
		}
		return first
	}
	// answer answers the n departures after first, in the order the
	// server answered them: the ones in throttled get a wait that ends at
	// end, jittered by the flight.
	answer := func(first uint64, n int, end int64, throttled ...uint64) {
		thr := make(map[uint64]bool)
		for _, d := range throttled {
			thr[d] = true
		}
		order := append([]uint64(nil), throttled...) // the throttles first
		for d := uint64(1); d <= uint64(n); d++ {
			if !thr[d] {
				order = append(order, d)
			}
		}
		for i, d := range order {
			if thr[d] {
				w.throttled(end+int64(i)*ms, first+d, sent)
			}
			w.answered(first + d)
		}
	}
	// Cycle 0: a burst of 28; 8 throttled, the waits end at 1 s.
	answer(send(28, 0), 28, 1000*ms, 23, 21, 28, 22, 24, 25, 26, 27)
	// Cycles 1 and 2: 24 leave at once, 20 go through.
	answer(send(24, 1000*ms), 24, 2001*ms, 1, 22, 16, 3) // #29, the first to leave, throttled
	assert.False(t, w.on, "one cycle is a guess")
	answer(send(24, 2001*ms), 24, 3002*ms, 8, 1, 19, 24)
	require.True(t, w.on, "two cycles agree")
	assert.Equal(t, 20.0, w.limit)
	assert.Equal(t, 1000*ms, w.period, "to the nearest 10 ms")
	assert.Equal(t, 3002*ms, w.earliest(2500*ms), "nothing before the boundary")
	first := sent
	for i := range int64(20) {
		at := 3002*ms + i*ms
		require.Equal(t, at, w.earliest(at), "request %d of the window", i)
		send(1, at)
	}
	assert.Equal(t, 4002*ms, w.earliest(3100*ms), "the 21st waits for the next boundary")
	// Throttles while in use, in any order: the quota is what went through,
	// from the boundary they name.
	w.throttled(4003*ms, first+7, sent)
	assert.Equal(t, 19.0, w.limit)
	assert.Equal(t, 4003*ms, w.earliest(3500*ms))
	w.throttled(4004*ms, first+2, sent)
	assert.Equal(t, 18.0, w.limit)
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
