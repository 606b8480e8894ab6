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
	var sent, answers uint64
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
				w.unheard(sent, sent-answers)
				w.throttled(end+int64(i)*ms, first+d, sent)
			}
			w.answered(first + d)
			answers++
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
	// A window in use holds its key while it is used, and for as long as
	// a cut pace would after the last departure; no longer.
	last := 3002*ms + 19*ms
	assert.False(t, w.idle(last+learnStale), "a window used 10 minutes ago is kept")
	assert.True(t, w.idle(last+learnStale+ms), "a window unused for longer is forgotten with its key")
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
		off, ok := h.clockOffset(time.Now())
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

// A limit of 30 per 3 s whose burst is its count is a bucket until the
// server proves windows of 3 s; then it is counted in them: 30 from each
// boundary on, and none more until the next. A limit of another length, or
// one with a smaller burst, keeps its bucket; and a window the server no
// longer proves gives the bucket back.
func TestALimitIsCountedInTheServersProvenWindows(t *testing.T) {
	ms := int64(time.Millisecond)
	lim := Per(30, 3*time.Second).WithBurst(30)
	newKey := func(lims ...Limit) *keyState {
		k := &keyState{lims: lims}
		k.pacer.init(lims)
		return k
	}
	k := newKey(lim)
	for range 30 {
		require.Equal(t, int64(0), k.pacer.earliest(0, 1, 1))
		k.pacer.take(0, 1)
	}
	assert.Equal(t, 100*ms, k.pacer.earliest(0, 1, 1), "a bucket: 10 a second after its burst")

	// The server proves windows of 3 s, one of which begins at 1.3 s.
	k.model.window, k.model.period, k.model.resetSeen = true, 3000*ms, 1300*ms
	k.align(50 * ms)
	require.NotNil(t, k.pacer.win)
	assert.Equal(t, 100*ms, k.pacer.earliest(50*ms, 1, 1), "the bucket paces until the next boundary")
	for at := 100 * ms; at <= 1200*ms; at += 100 * ms {
		require.Equal(t, at, k.pacer.earliest(at, 1, 1))
		k.pacer.take(at, 1)
	}
	assert.Equal(t, 1300*ms, k.pacer.earliest(1250*ms, 5, 5), "the bucket is full again at the boundary")
	for range 30 {
		require.Equal(t, 1300*ms, k.pacer.earliest(1300*ms, 1, 1))
		k.pacer.take(1300*ms, 1)
	}
	assert.Equal(t, 4300*ms, k.pacer.earliest(1300*ms, 1, 1), "a window holds 30")
	assert.Equal(t, 4300*ms, k.pacer.earliest(2*1300*ms, 1, 1))
	k.pacer.giveBack(1400*ms, 1)
	assert.Equal(t, 1400*ms, k.pacer.earliest(1400*ms, 1, 1), "one given back in the window")
	k.pacer.take(1400*ms, 1)
	for i := range 30 {
		at := 4300*ms + int64(i)*10*ms // the next window, spread out
		require.Equal(t, at, k.pacer.earliest(at, 1, 1))
		k.pacer.take(at, 1)
	}
	assert.Equal(t, 7300*ms, k.pacer.earliest(4700*ms, 1, 1))

	// The boundary measured again, 20 ms earlier: the window being
	// counted keeps its count.
	k.model.resetSeen = 7280 * ms
	k.align(5000 * ms)
	assert.Equal(t, 7280*ms, k.pacer.earliest(5000*ms, 1, 1))

	// The server's answers make it a bucket after all: the limit's bucket
	// paces again, from what the windows left of it.
	k.model.window = false
	k.align(5000 * ms)
	assert.Nil(t, k.pacer.win)
	assert.Greater(t, k.pacer.earliest(5000*ms, 30, 30), 5000*ms)

	for _, l := range []Limit{Per(30, 6*time.Second).WithBurst(30), Per(30, 3*time.Second).WithBurst(10), Per(30, 3*time.Second)} {
		k := newKey(l)
		k.model.window, k.model.period, k.model.resetSeen = true, 3000*ms, 1300*ms
		k.align(0)
		assert.Nil(t, k.pacer.win, "%v", l)
	}
	// A window learned from the spacing of throttles counts as well.
	k = newKey(PerSecond(3), lim)
	k.window.on, k.window.period, k.window.end = true, 3000*ms, 900*ms
	k.align(0)
	require.NotNil(t, k.pacer.win)
	assert.Equal(t, uint64(2), k.pacer.win.mask)
}

// Once a request held while the global window is learned has waited its
// longest (its answers are late), earliest lets it go, and take must too:
// a take that refused what earliest allowed left dispatch looking again
// forever under the key's lock (a hang seen on loopback, answers slower
// than holdFor).
func TestAHeldScopeRequestGoesOnceItsHoldIsOver(t *testing.T) {
	ms := int64(time.Millisecond)
	sc := &scopeState{}
	sc.activate()
	var seqs []uint64
	for range 3 {
		seq, ok := sc.take(0, 0)
		require.True(t, ok)
		seqs = append(seqs, seq)
	}
	for _, seq := range seqs {
		sc.answered(seq, 20*ms, 20*ms)
	}
	seq, ok := sc.take(21*ms, 21*ms)
	require.True(t, ok)
	sc.throttled(1000*ms, 1000*ms, seq) // the first cycle: 3 through, the window ends at 1 s
	for range 3 {
		_, ok := sc.take(1000*ms, 1000*ms)
		require.True(t, ok)
	}
	// The quota counted is spent after the end, and no answer has come:
	// the next request is held, but not past its hold.
	assert.Greater(t, sc.earliest(1000*ms), 1000*ms)
	late := 2000 * ms
	require.Equal(t, late, sc.earliest(late))
	_, ok = sc.take(late, late)
	assert.True(t, ok, "take refused what earliest allowed")
}
