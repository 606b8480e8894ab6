package headway

import (
	"net/http"
	"sync/atomic"
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
		_, _, ok := h.offsetBounds(time.Now())
		require.True(t, ok)
		h.mu.Lock()
		n := h.offset.n
		h.mu.Unlock()
		assert.Equal(t, datesMost, n, "every answer read until the offset was known")
		assert.False(t, h.wantDates.Load())
		assert.Zero(t, tr.learningHosts.Load(), "no host learns any more")
	})
}

// TestOffsetBoundsHoldOnAClockThatDrifts reads the Dates of a server whose
// clock loses half a millisecond a second (as NTP slews one at most) for
// ten minutes, ten answers a second of 20 ms each: the estimate is never
// ahead of the server's clock (a wait until one of its instants is never
// cut short), and it stays within 100 ms of it (60 ms). Intersected
// without age, the bounds kept the offset they had first narrowed to, and
// the estimate was ahead of the server's clock 40 s in.
func TestOffsetBoundsHoldOnAClockThatDrifts(t *testing.T) {
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	skew := func(at time.Time) time.Duration { // the truth: 30 s, less 0.5 ms a second
		return 30*time.Second - at.Sub(t0)/2000
	}
	var c clockOffset
	worst := time.Duration(0)
	for i := range 6000 {
		sent := t0.Add(time.Duration(i)*100*time.Millisecond + time.Duration(i%7)*time.Millisecond)
		written := sent.Add(10 * time.Millisecond)
		recv := sent.Add(20 * time.Millisecond)
		date := written.Add(skew(written)).Truncate(time.Second)
		c.observe(date, sent, recv)
		for _, at := range []time.Time{recv, recv.Add(50 * time.Millisecond)} {
			est := c.estimate(at)
			require.LessOrEqual(t, est, skew(at), "answer %d: the estimate is ahead of the server's clock", i)
			if i > 100 {
				worst = max(worst, skew(at)-est)
			}
		}
	}
	assert.Less(t, worst, 100*time.Millisecond, "the estimate lags the server's clock")
	t.Logf("the estimate lags by %v at most", worst)
}

// TestDatesAreReadAgainOnceTheBoundsHaveAged: a host whose clock offset is
// known reads no Dates from answers that say nothing else; once its bounds
// have widened with age past datesEnough, its keys read them again, and a
// few narrow them back.
func TestDatesAreReadAgainOnceTheBoundsHaveAged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &adaptRT{script: func(int, *http.Request) (int, http.Header) {
			h := http.Header{}
			h.Set("Date", time.Now().Add(-1234*time.Millisecond).UTC().Format(http.TimeFormat))
			return http.StatusOK, h
		}}
		tr := New(rt)
		h := tr.hosts.get("api.test")
		defer tr.hosts.put("api.test", h)
		get := func() {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			require.NoError(t, err)
			resp.Body.Close()
		}
		for range 200 {
			get()
			time.Sleep(37 * time.Millisecond) // the Dates tick at every phase
		}
		require.False(t, h.wantDates.Load(), "the offset is known")
		lo, hi, _ := h.offsetBounds(time.Now())
		require.LessOrEqual(t, hi-lo, datesEnough)
		time.Sleep(time.Minute) // 60 ms wider
		lo, hi, _ = h.offsetBounds(time.Now())
		require.Greater(t, hi-lo, datesEnough)
		for range datesAbsent {
			get()
		}
		assert.True(t, h.wantDates.Load(), "a key's checkpoint saw the bounds had aged")
		for range 200 {
			get()
			time.Sleep(37 * time.Millisecond)
		}
		assert.False(t, h.wantDates.Load(), "known again")
		off, ok := h.clockOffset(time.Now())
		require.True(t, ok)
		assert.LessOrEqual(t, off, -1234*time.Millisecond)
		assert.Greater(t, off, -1234*time.Millisecond-datesEnough)
	})
}

// The estimate and the instant it was made are read together: readers of
// the offset take no lock, and an estimate read with the instant of
// another ages by what separates them (an hour: 3.6 s, which a wait
// until an instant the server names would be cut short by).
func TestClockOffsetIsReadWhole(t *testing.T) {
	learning := new(atomic.Int64)
	h := &hostState{name: "api.example", learning: learning}
	t1 := time.Unix(1_800_000_000, 0)
	t2 := t1.Add(time.Hour)
	// Offsets that contradict each other: each Date starts the bounds
	// again, at its own instant.
	h.observeDate(t1, t1, t1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			h.observeDate(t2.Add(10*time.Second), t2, t2)
			h.observeDate(t1, t1, t1)
		}
	}()
	defer func() { close(stop); <-done }()
	want := map[time.Duration]bool{-3600 * time.Millisecond: true, 10 * time.Second: true}
	for range 2_000_000 {
		if off, ok := h.clockOffset(t2); ok && !want[off] {
			t.Fatalf("offset %v at t2: an estimate read with another's instant", off)
		}
	}
}
