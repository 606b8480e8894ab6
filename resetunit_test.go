package headway_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// TestResetsInMilliseconds runs servers of fixed windows whose
// X-Rate-Limit-Reset is a bare delta in milliseconds, as Prisjakt's hourly
// window's is ("the time in milliseconds when the current rate limit
// window resets", 600000 for ten minutes), and whose 429 says only that
// the window is spent (Remaining 0 and the reset, no Retry-After), with no
// limit on the client. Read as seconds, the first
// reset of a 10 s window is almost three hours: a key would hand every 429
// back as too long to wait on, and take its pace from a window a thousand
// times its length. Two answers of one window show the reset falling a
// thousand times faster than the clock, and the host's resets are read in
// milliseconds from then on: every request gets through at the server's
// pace, as against the same server stating its resets in seconds, with the
// few throttles and hand-backs of the answers read before it was learned.
func TestResetsInMilliseconds(t *testing.T) {
	for _, c := range []struct {
		name   string
		limit  int
		window time.Duration
	}{
		{"100-per-10s", 100, 10 * time.Second},
		{"20-per-2s", 20, 2 * time.Second},
		{"200-per-minute", 200, time.Minute},
	} {
		for _, workers := range []int{1, 16} {
			t.Run(c.name+"/"+itoa(workers), func(t *testing.T) {
				n := 3*c.limit + 17
				run := func(form fakeserver.ResetForm) dialectResult {
					var r dialectResult
					synctest.Test(t, func(t *testing.T) {
						srv := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: c.limit, Window: c.window,
							Dialect: fakeserver.XRateLimit{Prefix: "X-Rate-Limit-", Reset: form, Wait: fakeserver.WaitReset},
							Faults:  fakeserver.Faults{Latency: 5 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1}})
						rate := max(int(float64(c.limit)/c.window.Seconds()), 1)
						r = runDialect(t, srv, srv.Transport(), "http://api.test/items", n, workers, rate, 1)
						if got := srv.Stats().Admitted; got != int64(n) {
							t.Errorf("server admitted %d, want %d", got, n)
						}
					})
					return r
				}
				ms, sec := run(fakeserver.ResetDeltaMillis), run(fakeserver.ResetDelta)
				t.Logf("ms:  %v", ms)
				t.Logf("sec: %v", sec)
				// Read right, a server in milliseconds costs what one in
				// seconds does, and its finer resets may save some: no more
				// time than it, with a slack of a tenth of a window (and of
				// its rounding of resets up to the second), and the throttles
				// and hand-backs of the answers that came before the unit was
				// learned, a window's worth at most.
				if slack := sec.elapsed + c.window/10 + time.Second; ms.elapsed > slack {
					t.Errorf("took %v, the same server in seconds %v", ms.elapsed, sec.elapsed)
				}
				if extra := int64(workers + 1); ms.rejected > sec.rejected+extra || ms.finals > sec.finals+extra {
					t.Errorf("%d throttled and %d handed back, the same server in seconds %d and %d",
						ms.rejected, ms.finals, sec.rejected, sec.finals)
				}
				if ms.early > sec.early {
					t.Errorf("%d sent while told to wait, the same server in seconds %d", ms.early, sec.early)
				}
			})
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
