package fakeserver

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type step struct {
	at        time.Duration // since t0
	allowed   bool
	remaining int
	retry     time.Duration // retryAfter, for a rejection
}

func runSteps(t *testing.T, lim limiter, steps []step) {
	t.Helper()
	for i, st := range steps {
		d := lim.take(t0.Add(st.at).UnixNano())
		assert.Equal(t, st.allowed, d.allowed, "step %d at %v: allowed", i, st.at)
		assert.Equal(t, st.remaining, d.remaining, "step %d at %v: remaining", i, st.at)
		assert.Equal(t, st.retry, d.retryAfter, "step %d at %v: retryAfter", i, st.at)
	}
}

func TestBuckets(t *testing.T) {
	// 3 per second, burst 2: one token every 333333333.3ns.
	steps := []step{
		{0, true, 1, 0},
		{0, true, 0, 0},
		{0, false, 0, 333333334},
		{333333333, false, 0, 1},
		{333333334, true, 0, 0},
		{time.Second, true, 1, 0},
		{time.Second, true, 0, 0},
		{time.Second, false, 0, 333333334},
		{10 * time.Second, true, 1, 0}, // capped at the burst
	}
	for _, alg := range []Algorithm{TokenBucket, LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			cfg := Config{Algorithm: alg, Limit: 3, Burst: 2}.withDefaults()
			runSteps(t, newLimiter(&cfg), steps)
		})
	}
}

func TestFixedWindow(t *testing.T) {
	cfg := Config{Algorithm: FixedWindow, Limit: 3, Burst: 99}.withDefaults()
	runSteps(t, newLimiter(&cfg), []step{
		{900 * time.Millisecond, true, 2, 0},
		{900 * time.Millisecond, true, 1, 0},
		{900 * time.Millisecond, true, 0, 0},
		{999 * time.Millisecond, false, 0, time.Millisecond},
		{time.Second, true, 2, 0}, // a new window: the boundary burst
		{time.Second, true, 1, 0},
		{time.Second, true, 0, 0},
		{1500 * time.Millisecond, false, 0, 500 * time.Millisecond},
		{5 * time.Second, true, 2, 0},
	})
}

func TestSlidingWindow(t *testing.T) {
	cfg := Config{Algorithm: SlidingWindow, Limit: 3}.withDefaults()
	runSteps(t, newLimiter(&cfg), []step{
		{0, true, 2, 0},
		{500 * time.Millisecond, true, 1, 0},
		{900 * time.Millisecond, true, 0, 0},
		{950 * time.Millisecond, false, 0, 50 * time.Millisecond},
		{time.Second, true, 0, 0}, // the request at 0 left (t-w, t]
		{time.Second, false, 0, 500 * time.Millisecond},
		{1500 * time.Millisecond, true, 0, 0},
		{1900*time.Millisecond - 1, false, 0, 1},
		{5 * time.Second, true, 2, 0},
	})
}

func TestLimiterResetAndNext(t *testing.T) {
	cfg := Config{Algorithm: TokenBucket, Limit: 10, Burst: 5}.withDefaults()
	lim := newLimiter(&cfg)
	now := t0.UnixNano()
	var d decision
	for range 5 {
		d = lim.take(now)
	}
	assert.Equal(t, 0, d.remaining)
	assert.Equal(t, 500*time.Millisecond, d.resetAfter)
	assert.Equal(t, 100*time.Millisecond, d.nextAfter)
	assert.False(t, lim.idle(now+int64(499*time.Millisecond)))
	assert.True(t, lim.idle(now+int64(500*time.Millisecond)))
}

// TestBucketsAgree checks that the token bucket and the GCRA, written
// differently, agree on every answer for random arrivals and settings.
func TestBucketsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		cfg := Config{
			Limit:  1 + rng.IntN(100),
			Window: time.Duration(1 + rng.Int64N(int64(3*time.Second))),
			Burst:  1 + rng.IntN(20),
		}.withDefaults()
		tb := newLimiter(&cfg)
		cfg.Algorithm = LeakyBucket
		g := newLimiter(&cfg)
		now := t0.UnixNano()
		for i := range 300 {
			if rng.IntN(3) > 0 {
				now += rng.Int64N(int64(cfg.Window) / int64(cfg.Limit) * 2)
			}
			a, b := tb.take(now), g.take(now)
			require.Equal(t, a, b, "trial %d step %d, %+v", trial, i, cfg)
			require.Equal(t, tb.idle(now), g.idle(now))
		}
	}
}

// TestObeyingRetryAfterIsAdmitted checks, for every algorithm, that a
// request sent exactly retryAfter after a rejection is admitted, and that
// no window of length Window ever admits more than the algorithm allows.
func TestObeyingRetryAfterIsAdmitted(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, alg := range []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindow, SlidingWindowCounter, AnchoredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			for range 50 {
				cfg := Config{
					Algorithm: alg,
					Limit:     1 + rng.IntN(50),
					Window:    time.Duration(1 + rng.Int64N(int64(2*time.Second))),
					Burst:     1 + rng.IntN(10),
				}.withDefaults()
				lim := newLimiter(&cfg)
				now := t0.UnixNano()
				var admitted []int64
				for range 500 {
					d := lim.take(now)
					if d.allowed {
						admitted = append(admitted, now)
						now += rng.Int64N(int64(cfg.Window) / int64(cfg.Limit))
						continue
					}
					require.Positive(t, d.retryAfter)
					now += int64(d.retryAfter)
					d = lim.take(now)
					require.True(t, d.allowed, "%+v: not admitted after retryAfter", cfg)
					admitted = append(admitted, now)
				}
				most := cfg.Limit
				switch alg {
				case TokenBucket, LeakyBucket:
					most = cfg.Burst + cfg.Limit
				case FixedWindow, SlidingWindowCounter, AnchoredWindow:
					most = 2 * cfg.Limit
				}
				assert.LessOrEqual(t, peak(admitted, int64(cfg.Window)), most, "%+v", cfg)
			}
		})
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindow, SlidingWindowCounter, AnchoredWindow} {
		got, err := ParseAlgorithm(alg.String())
		require.NoError(t, err)
		assert.Equal(t, alg, got)
	}
	got, err := ParseAlgorithm("GCRA")
	require.NoError(t, err)
	assert.Equal(t, LeakyBucket, got)
	_, err = ParseAlgorithm("token")
	assert.ErrorContains(t, err, "fakeserver: unknown algorithm")
	assert.Equal(t, "Algorithm(9)", Algorithm(9).String())
}

func TestPeak(t *testing.T) {
	ts := []int64{0, 1, 2, 10, 11, 12, 13, 20}
	for _, tc := range []struct {
		w    int64
		want int
	}{{1, 1}, {3, 3}, {4, 4}, {10, 4}, {11, 5}, {21, 8}} {
		assert.Equal(t, tc.want, peak(ts, tc.w), "w=%d", tc.w)
	}
	assert.Equal(t, 0, peak(nil, 5))
}
