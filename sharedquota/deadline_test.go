package sharedquota

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// TestShortDeadlineFallsBackOnStalledRedis: a request whose deadline is
// shorter than the quota's timeout, against a Redis that accepts and
// never answers (SIGSTOP), is paced by the fallback and sent: the call to
// Redis gets at most half the time the request has left, not all of it.
// With a client that honours context deadlines and one that does not, and
// with leases (the requests that wait for another's lease call are bound
// by the same share).
func TestShortDeadlineFallsBackOnStalledRedis(t *testing.T) {
	srv := startRedis(t)
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer api.Close()
	const deadline = 400 * time.Millisecond // shorter than the quota's timeout
	for _, tc := range []struct {
		name    string
		honour  bool
		lease   int
		workers int
	}{
		{"ContextTimeoutEnabled", true, 0, 1},
		{"guarded client", false, 0, 1},
		{"leases", true, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: tc.honour, ReadTimeout: 10 * time.Second})
			defer c.Close()
			// An hour between heartbeats: no heartbeat finds Redis
			// stalled first, so every request meets the stall itself.
			q := NewRedis(c, WithPrefix(testPrefix(t)), WithTimeout(5*time.Second), WithHeartbeat(time.Hour), WithLease(tc.lease))
			defer q.Close()
			client := &http.Client{Transport: headway.New(api.Client().Transport,
				headway.WithLimit(headway.PerSecond(100).WithBurst(10)),
				headway.WithKey(func(*http.Request) string { return "k" }),
				headway.WithSharedQuota(q),
			)}
			get := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.URL, nil)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				return err
			}
			if err := get(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, func() bool { return q.Live("k") == 1 })
			if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) }()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var slowest time.Duration
			for range tc.workers {
				wg.Go(func() {
					for i := range 3 {
						start := time.Now()
						if err := get(); err != nil {
							t.Errorf("request %d with Redis stalled: %v", i, err)
						}
						mu.Lock()
						slowest = max(slowest, time.Since(start))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			s := q.Stats()
			t.Logf("slowest request %v of %v allowed; stats %+v", slowest, deadline, s)
			if s.Degraded == 0 {
				t.Errorf("stats %+v: nothing fell back", s)
			}
			// A call cut short by its request's share says Redis is
			// slower than the request could wait, not that it is away.
			if q.health.isDown() {
				t.Errorf("Redis marked away by calls cut short")
			}
		})
	}
}

// TestFallbackCountsFromTheAsk: a fallback decided after a call to Redis
// took part of the time the caller allowed spends only a slot within what
// is left, and reports a slot it did not spend as a wait longer than what
// the caller allowed, counted from its ask: a caller reading a wait within
// its allowance as a slot spent never sends on one that was not.
func TestFallbackCountsFromTheAsk(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t)) // nothing listens there
	q := newQuota(t, newClient(t, addr), WithFallbackProcesses(1))
	lim := []headway.Limit{headway.Every(100 * time.Millisecond)}
	ks := q.state("k")
	err := &UnavailableError{Op: "reserve", Err: context.DeadlineExceeded}
	// Asked 50ms ago, allowing 120ms: 70ms are left, and the fallback's
	// first slot is 100ms off (it starts empty).
	now := q.now()
	d, _ := q.degrade(ks, lim, 1, 120*time.Millisecond, now-int64(50*time.Millisecond), err)
	if d <= 120*time.Millisecond {
		t.Fatalf("a slot beyond what is left reported as a wait of %v, within the 120ms allowed", d)
	}
	// Nothing was spent: the slot is still the first one.
	if d, _ := q.degrade(ks, lim, 1, forever, q.now(), err); d > 100*time.Millisecond {
		t.Fatalf("after a slot not spent, the next waits %v, want 100ms at most", d)
	}
}
