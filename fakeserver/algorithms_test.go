package fakeserver

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlidingWindowCounter(t *testing.T) {
	// 4 a second. The first window is fresh: 4 at once. In the next, the
	// previous 4 weigh 4·(1-f): the j-th of it goes once f > (j-1)/4.
	cfg := Config{Algorithm: SlidingWindowCounter, Limit: 4}.withDefaults()
	ms := time.Millisecond
	runSteps(t, newLimiter(&cfg), []step{
		{600 * ms, true, 3, 0},
		{600 * ms, true, 2, 0},
		{600 * ms, true, 1, 0},
		{600 * ms, true, 0, 0},
		{700 * ms, false, 0, 300*ms + 1}, // the next window's first point past 0
		{time.Second, false, 0, 1},       // 4·(1-0) is not under 4
		{time.Second + 1, true, 0, 0},
		{time.Second + 100*ms, false, 0, 150*ms + 1}, // 4·(1-f) < 3 once f > 1/4
		{time.Second + 250*ms + 1, true, 0, 0},
		{time.Second + 900*ms, true, 1, 0}, // 4·0.1 + 2 < 4 and + 3 < 4
		{time.Second + 900*ms, true, 0, 0},
		{time.Second + 900*ms, false, 0, 100*ms + 1}, // the next window's 4·(1-0) is not under 4
		// Two windows later nothing weighs: 4 at once.
		{4 * time.Second, true, 3, 0},
	})
}

// TestSlidingWindowCounterOfADay: a daily quota of 200,000 (n·w over
// 2^64 ns) is counted as exactly as one of 4 a second: the first request
// of a rested key goes with 199,999 left, and half a day into the next
// window the previous day's count weighs half.
func TestSlidingWindowCounterOfADay(t *testing.T) {
	const n, day = 200_000, int64(24 * time.Hour)
	cfg := Config{Algorithm: SlidingWindowCounter, Limit: n, Window: 24 * time.Hour}.withDefaults()
	lim := newLimiter(&cfg)
	t0 := 20_000 * day // a window's start
	d := lim.take(t0)
	require.True(t, d.allowed)
	assert.Equal(t, n-1, d.remaining)
	for range n - 1 {
		d = lim.take(t0 + 1)
	}
	require.True(t, d.allowed)
	assert.Equal(t, 0, d.remaining)
	assert.Equal(t, time.Duration(day), d.nextAfter, "the next window's first point past 0")
	assert.Greater(t, d.resetAfter, time.Duration(day))
	assert.LessOrEqual(t, d.resetAfter, time.Duration(2*day))
	d = lim.take(t0 + day + day/2)
	require.True(t, d.allowed)
	assert.Equal(t, n/2-1, d.remaining)
}

// TestSlidingWindowCounterResetAtWindowEnd: with ResetAtWindowEnd, the
// reset stated is the end of the present window, whatever still weighs
// after it.
func TestSlidingWindowCounterResetAtWindowEnd(t *testing.T) {
	cfg := Config{Algorithm: SlidingWindowCounter, Limit: 4, ResetAtWindowEnd: true}.withDefaults()
	lim := newLimiter(&cfg)
	ms := int64(time.Millisecond)
	for range 4 {
		lim.take(t0.UnixNano() + 600*ms)
	}
	d := lim.take(t0.UnixNano() + 700*ms)
	assert.False(t, d.allowed)
	assert.Equal(t, 300*time.Millisecond, d.resetAfter, "the window's end")
	assert.Equal(t, 300*time.Millisecond+1, d.retryAfter, "but nothing goes until the next window's first point past 0")
	d = lim.take(t0.UnixNano() + 1000*ms + 1)
	assert.True(t, d.allowed)
	assert.Equal(t, 0, d.remaining, "the reset stated brought nothing back")
	assert.Equal(t, time.Second-1, d.resetAfter)
}

func TestAnchoredWindow(t *testing.T) {
	// 3 per second, each window from the first request after the last.
	cfg := Config{Algorithm: AnchoredWindow, Limit: 3}.withDefaults()
	ms := time.Millisecond
	runSteps(t, newLimiter(&cfg), []step{
		{300 * ms, true, 2, 0},
		{300 * ms, true, 1, 0},
		{900 * ms, true, 0, 0},
		{time.Second, false, 0, 300 * ms}, // not on the clock's second
		{1300*ms - 1, false, 0, 1},
		{1300 * ms, true, 2, 0}, // a window begins here
		{2299 * ms, true, 1, 0},
		{2299 * ms, true, 0, 0},
		{2299 * ms, false, 0, ms},
		{2700 * ms, true, 2, 0}, // the window that ended at 2.3s does not come back
	})
}

// TestDecisionsAreExact checks each limiter's answers against what it then
// does, for random settings and arrivals: a rejected request sent again
// retryAfter later is admitted and a nanosecond before is not; remaining
// more go now and one more does not; resetAfter later remaining is back to
// capacity and a nanosecond before it is not.
func TestDecisionsAreExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, alg := range []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindow, SlidingWindowCounter, AnchoredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			for trial := range 40 {
				cfg := Config{
					Algorithm: alg,
					Limit:     1 + rng.IntN(20),
					Window:    time.Duration(1 + rng.Int64N(int64(2*time.Second))),
					Burst:     1 + rng.IntN(10),
				}.withDefaults()
				var taken []int64 // every arrival so far, to replay a copy
				replay := func(extra ...int64) []decision {
					lim := newLimiter(&cfg)
					for _, at := range taken {
						lim.take(at)
					}
					var ds []decision
					for _, at := range extra {
						ds = append(ds, lim.take(at))
					}
					return ds
				}
				lim := newLimiter(&cfg)
				now := t0.UnixNano()
				for i := range 60 {
					now += rng.Int64N(int64(cfg.Window)/int64(cfg.Limit)*2 + 1)
					d := lim.take(now)
					taken = append(taken, now)
					msg := []any{"trial %d step %d: %+v", trial, i, cfg}
					if !d.allowed {
						require.Positive(t, d.retryAfter, msg...)
						ds := replay(now + int64(d.retryAfter) - 1)
						require.False(t, ds[0].allowed, msg...)
						ds = replay(now + int64(d.retryAfter))
						require.True(t, ds[0].allowed, msg...)
					}
					more := make([]int64, d.remaining+1)
					for j := range more {
						more[j] = now
					}
					ds := replay(more...)
					for j, dd := range ds {
						require.Equal(t, j < d.remaining, dd.allowed, msg...)
					}
					// Back to capacity: one more leaves capacity-1.
					full := func(dd decision) bool { return dd.allowed && dd.remaining == dd.capacity-1 }
					ds = replay(now + int64(d.resetAfter))
					require.True(t, full(ds[0]), msg...)
					if d.resetAfter > 0 {
						ds = replay(now + int64(d.resetAfter) - 1)
						require.False(t, full(ds[0]), msg...)
					}
				}
			}
		})
	}
}

// TestServerClockDrift runs a server whose clock gains 10 ms a second: its
// Dates and fixed windows run on it, and its waits (WaitHeader) are told
// on Now's clock.
func TestServerClockDrift(t *testing.T) {
	clk := newClock()
	s := New(Config{Algorithm: FixedWindow, Limit: 1, Window: 10 * time.Second, Now: clk.Now,
		ClockSkew: 2 * time.Second, ClockDrift: 10 * time.Millisecond, Dialect: GitHub{}, TellWaits: true})
	assert.Equal(t, t0, s.Config().DriftFrom)
	resp := get(s, "/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, httpDate(t0.Add(2*time.Second)), resp.Header.Get("Date"))

	// 100 s later the server's clock is 3 s ahead, and a window of its 10 s
	// lasts 9.9 s of ours.
	clk.Advance(100 * time.Second)
	require.Equal(t, http.StatusOK, get(s, "/").StatusCode)
	resp = get(s, "/")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, httpDate(t0.Add(103*time.Second)), resp.Header.Get("Date"))
	// Its window [100, 110) of its clock ends at 107 s of ours, less the
	// 0.07 s it gains meanwhile.
	end := t0.Add(110 * time.Second)
	assert.Equal(t, strconv.FormatInt(end.Unix(), 10), resp.Header.Get("X-Ratelimit-Reset"))
	told, err := strconv.ParseInt(resp.Header.Get(WaitHeader), 10, 64)
	require.NoError(t, err)
	want := t0.Add(100*time.Second + (7*time.Second*100+100)/101) // 7 s of the server's in 7/1.01 of ours, rounded up
	assert.Equal(t, want.UnixNano(), told)
	clk.Advance(time.Duration(told - clk.Now().UnixNano() - 1))
	require.Equal(t, http.StatusForbidden, get(s, "/").StatusCode)
	clk.Advance(time.Nanosecond)
	require.Equal(t, http.StatusOK, get(s, "/").StatusCode)
}

func TestServerClock(t *testing.T) {
	for _, drift := range []time.Duration{-999 * time.Millisecond, -7 * time.Millisecond, 0, 3, 250 * time.Millisecond, 999 * time.Millisecond} {
		c := Config{ClockSkew: -5 * time.Second, ClockDrift: drift, DriftFrom: t0}
		clock := c.clock(time.Time{})
		prev := clock.at(t0.UnixNano() - int64(time.Hour))
		rng := rand.New(rand.NewPCG(7, uint64(drift)))
		for ns := t0.UnixNano() - int64(time.Hour); ns < t0.UnixNano()+int64(time.Hour); ns += rng.Int64N(int64(time.Minute)) + 1 {
			s := clock.at(ns)
			require.GreaterOrEqual(t, s, prev, "drift %v", drift)
			prev = s
			// A span of the server's, measured on Now's clock, rounded up.
			d := rng.Int64N(int64(time.Hour))
			sp := clock.span(d)
			require.GreaterOrEqual(t, clock.at(ns+sp)-s, d-1, "drift %v", drift) // at() truncates
		}
		assert.Equal(t, t0.Add(-5*time.Second).UnixNano(), clock.at(t0.UnixNano()))
	}
	assert.Equal(t, 999*time.Millisecond, clampDrift(5*time.Second))
	assert.Equal(t, -999*time.Millisecond, clampDrift(-time.Hour))
}

// TestLeastOfTheNewWindows checks Least for the sliding window counter,
// anchored windows and a drifting fixed window against the limiter itself:
// a client that sends every request the moment the limiter would admit it
// (probing each nanosecond it names: retryAfter) has its last admitted
// exactly Least after start.
func TestLeastOfTheNewWindows(t *testing.T) {
	for _, sh := range AlgorithmShapes() {
		if sh.Config.Dialect != (RetryAfterSeconds{}) {
			continue // the same limiter under every dialect
		}
		for _, phase := range []time.Duration{0, 300 * time.Millisecond, 1700 * time.Millisecond} {
			start := t0.Add(phase)
			cfg := sh.Config.withDefaults()
			clock := cfg.clock(start)
			for _, n := range []int{1, 20, 21, 39, 40, 41, 220} {
				lim := newLimiter(&cfg)
				now, admitted := start.UnixNano(), 0
				last := now
				for admitted < n {
					d := lim.take(clock.at(now))
					if d.allowed {
						admitted, last = admitted+1, now
						continue
					}
					now += clock.span(int64(d.retryAfter))
				}
				got, want := sh.Least(n, start), time.Duration(last-start.UnixNano())
				assert.InDelta(t, want, got, float64(2*time.Microsecond), "%s from %v: Least(%d)", sh.Name, phase, n)
			}
		}
	}
}
