package headway_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// sentLog records when each request left, by path.
type sentLog struct {
	base http.RoundTripper
	mu   sync.Mutex
	at   map[string][]time.Time
}

func (l *sentLog) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	if l.at == nil {
		l.at = map[string][]time.Time{}
	}
	l.at[req.URL.Path] = append(l.at[req.URL.Path], time.Now())
	l.mu.Unlock()
	return l.base.RoundTrip(req)
}

func (l *sentLog) times(path string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.at[path]...)
}

// getOK sends a GET to url through c until it is admitted.
func getOK(t *testing.T, c *http.Client, url string) {
	t.Helper()
	for {
		resp, err := c.Get(url)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
	}
}

// One key (a host) whose server names a bucket per route holds the
// requests of every route in one queue. A bucket of two routes spent
// early in a window does not hold the other routes' requests queued
// behind its own: they leave as their buckets allow, in the same window
// (they waited for the next one, and a global window over the routes was
// never met: the known tail of TestSparseShapes' discord-routes-global).
func TestABucketSpentEarlyDoesNotHoldTheOtherRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		routes := map[string]string{"/a": "ab", "/b": "ab", "/c": "c"}
		srv := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 5, Window: time.Second,
			Key: func(r *http.Request) string { return routes[r.URL.Path] }, Dialect: fakeserver.Discord{},
			Faults: fakeserver.Faults{Latency: 20 * time.Millisecond}})
		log := &sentLog{base: srv.Transport()}
		c := &http.Client{Transport: headway.New(log)}
		start := time.Now()
		for _, p := range []string{"/a", "/b", "/c"} {
			getOK(t, c, "http://api.test"+p) // the routes' buckets, named
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { getOK(t, c, "http://api.test/a") }) // 3 left in ab: 5 wait for the next window
		}
		time.Sleep(time.Millisecond) // queued behind them
		for range 4 {
			wg.Go(func() { getOK(t, c, "http://api.test/c") }) // 4 left in c
		}
		wg.Wait()
		cs := log.times("/c")
		require.Len(t, cs, 5)
		for i, at := range cs[1:] {
			assert.Less(t, at.Sub(start), 200*time.Millisecond, "request %d of /c: its bucket had room in window 0", i+1)
		}
		assert.Zero(t, srv.Stats().Rejected, "throttled")
	})
}

// A key per route: the first request of route /a, counted right at the
// start of its window, is told Reset-After 1.000, which reads as a whole
// second; the other routes' answers state theirs to the millisecond. /a's
// window then had no gap: its quota left was spent after the server's
// boundary, before the reset it stated, and the server counted it in the
// next window on top of that window's whole quota (3 or 4 throttled). A
// host that states its resets to the millisecond has its whole ones read
// so.
func TestAWholeResetOnAHostOfMillisecondsIsNotSpentAcrossTheBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 5, Window: time.Second,
			Key: func(r *http.Request) string { return r.URL.Path }, Dialect: fakeserver.Discord{},
			Faults: fakeserver.Faults{Latency: 20 * time.Millisecond}})
		c := &http.Client{Transport: headway.New(srv.Transport(), headway.WithKey(headway.KeyByPath))}
		start := time.Now()              // a whole second, where the server's windows turn
		getOK(t, c, "http://api.test/a") // at 0: 4 left, reset after 1.000
		time.Sleep(10 * time.Millisecond)
		for i := range 16 {
			// From 30 ms on: resets after 0.970 and less. (And the host's
			// requests ramp up to 8 in flight: see scopeState.)
			getOK(t, c, fmt.Sprintf("http://api.test/b%d", i%4))
		}
		// After the server's boundary, before /a's stated reset (1.020).
		time.Sleep(time.Until(start.Add(1005 * time.Millisecond)))
		var wg sync.WaitGroup
		for range 9 {
			wg.Go(func() { getOK(t, c, "http://api.test/a") })
		}
		wg.Wait()
		assert.Zero(t, srv.Stats().Rejected, "throttled")
	})
}

// The global window of discord-routes-global (10 a second over six
// routes of 5) through answers that jitter by 0 to 100 ms on top of 20 ms,
// in virtual time: efficiency 0.95, at most one throttle a window after
// the first, none sent inside a wait the client knew of, and at most 10
// throttles a run (the first window's, while the global limit is unknown,
// then one in each of the two windows that measure it). Before, the
// shortest cycle under jitter measured the window 1-6 % short and its
// boundaries drifted early: 21-97 throttles a run at 20-100 ms, up to 10
// in one window; and at 0 ms a request left at the very instant the
// first global throttle came back.
func TestTheGlobalWindowThroughJitter(t *testing.T) {
	var sh fakeserver.Shape
	for _, s := range fakeserver.SparseShapes() {
		if s.Name == "discord-routes-global" {
			sh = s
		}
	}
	for _, jitter := range []time.Duration{0, 20, 50, 100} {
		for _, seed := range []uint64{1, 2} {
			for _, workers := range []int{8, 32} {
				sh := sh
				sh.Config.Faults = fakeserver.Faults{Latency: 20 * time.Millisecond, Jitter: jitter * time.Millisecond, Seed: seed}
				t.Run(fmt.Sprintf("jitter-%dms/seed-%d/%d", jitter, seed, workers), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						srv := fakeserver.New(sh.Config)
						r := runShape(t, sh, srv, srv.Transport(), "http://api.test", sh.Burst+int(20*sh.Rate), workers)
						t.Log(r)
						assert.GreaterOrEqual(t, r.efficiency, 0.95, "efficiency")
						assert.LessOrEqual(t, r.worst, 1, "throttles in one window after the first")
						assert.LessOrEqual(t, r.throttled, int64(10), "throttles")
						assert.Zero(t, r.ignored, "sent inside a wait the client knew of")
					})
				})
			}
		}
	}
}
