package headway_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// concResult is what a run against a server that limits the requests it
// works on at once did.
type concResult struct {
	efficiency float64 // the least time, n*lat/limit, over the time taken
	throttled  int64   // throttles the server sent
	known      int64   // requests sent inside a wait after its throttle came back
}

// runConcurrencyLimited sends n GETs from workers goroutines to a fake
// server that works on at most limit requests at once, each for lat, and
// refuses the next as dialect does (see runShape).
func runConcurrencyLimited(t *testing.T, dialect fakeserver.Dialect, limit, n, workers int, lat time.Duration) concResult {
	sh := fakeserver.Shape{Name: "concurrency", Rate: float64(limit) / lat.Seconds(), Burst: limit,
		Config: fakeserver.Config{Limit: 1 << 20, Burst: 1 << 20, Window: time.Second, MaxInFlight: limit,
			Dialect: dialect, Faults: fakeserver.Faults{Latency: lat}}}
	srv := fakeserver.New(sh.Config)
	r := runShape(t, sh, srv, srv.Transport(), "http://api.test", n, workers)
	least := time.Duration(n) * lat / time.Duration(limit)
	// The server's own count of requests sent inside a wait counts one
	// that left at the instant the refusal did (virtual time) before the
	// client read it, as requests sent at once after a wait are; the
	// Observer counts those sent after the client read it.
	return concResult{efficiency: least.Seconds() / r.elapsed.Seconds(), throttled: r.throttled, known: r.known}
}

// A server that works on 5 requests of a key at once, for 100 ms each,
// and refuses the next with a bare 429 or with Retry-After: 1, is served
// near what it allows once the key has learned the cap from two throttles
// that found the same 5 at work (see concLimit): 500 requests, 10 s at the
// least. Paced as a rate, it was served at 0.58-0.63 of that with bare
// 429s (0.30 in about one goroutine order of 40), and 0.20 with
// Retry-After, whose second-long pauses came again and again. The
// throttles are the first flight's (those past 5 of it) and the second
// cycle's, which measures the cap again; none is sent inside a wait.
func TestAConcurrencyLimitIsLearned(t *testing.T) {
	for _, d := range []struct {
		name  string
		d     fakeserver.Dialect
		floor float64
	}{
		// 0.85-0.96 over 300 goroutine orders.
		{"bare", fakeserver.Bare{}, 0.80},
		// 0.78-0.81: each of the two throttles that measure the cap costs
		// its second's pause, and the pace between them is a rate's.
		{"retry-after", fakeserver.RetryAfterSeconds{}, 0.68},
	} {
		for _, workers := range []int{8, 32, 64} {
			t.Run(fmt.Sprintf("%s/%d", d.name, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := runConcurrencyLimited(t, d.d, 5, 500, workers, 100*time.Millisecond)
					t.Logf("efficiency %.3f, %d throttled, %d sent inside a wait after it came", r.efficiency, r.throttled, r.known)
					if r.efficiency < d.floor {
						t.Errorf("efficiency %.3f, want at least %.2f", r.efficiency, d.floor)
					}
					if max := int64(2*workers + 10); r.throttled > max {
						t.Errorf("%d throttled, want at most %d", r.throttled, max)
					}
					if r.known != 0 {
						t.Errorf("%d sent inside a wait after its throttle came", r.known)
					}
				})
			})
		}
	}
}

// A server that raises the requests it works on at once, from 5 to 10,
// 30 s into the run, is found out by the cap's raises (see concLimit): a
// confirmed cap is raised again after 10 s, then 20 s, and a raise that
// goes through goes on at once. 4,500 requests of 100 ms each, 60 s at
// the least: 0.90-0.92 of it with bare 429s, and the last 10 s at the
// new limit (100/s).
func TestARaisedConcurrencyLimitIsFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &concLimiter{lat: 100 * time.Millisecond, limit: func() int {
			if time.Since(start) < 30*time.Second {
				return 5
			}
			return 10
		}}
		client := &http.Client{Transport: headway.New(srv)}
		const n = 4500
		var next atomic.Int64
		var wg sync.WaitGroup
		var mu sync.Mutex
		var done []time.Time
		for range 32 {
			wg.Go(func() {
				for i := next.Add(1); i <= n; i = next.Add(1) {
					for {
						resp, err := client.Get("http://api.test/items")
						if err != nil {
							t.Error(err)
							return
						}
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							break
						}
					}
					mu.Lock()
					done = append(done, time.Now())
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed := done[len(done)-1].Sub(start)
		eff := (60 * time.Second).Seconds() / elapsed.Seconds()
		last := 0
		for _, at := range done {
			if elapsed-at.Sub(start) <= 10*time.Second {
				last++
			}
		}
		t.Logf("efficiency %.3f (%v), %d throttled, %d answered in the last 10 s", eff, elapsed.Round(time.Millisecond), srv.throttled.Load(), last)
		if eff < 0.85 {
			t.Errorf("efficiency %.3f, want at least 0.85", eff)
		}
		if last < 900 {
			t.Errorf("%d answered in the last 10 s, want 900 at least (the raised limit's 1,000)", last)
		}
	})
}

// concLimiter is a server that works on limit() requests at once, for
// lat each, and refuses the next with a bare 429.
type concLimiter struct {
	mu        sync.Mutex
	at        int
	limit     func() int
	lat       time.Duration
	throttled atomic.Int64
}

func (c *concLimiter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	c.mu.Lock()
	if c.at >= c.limit() {
		c.mu.Unlock()
		c.throttled.Add(1)
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	c.at++
	c.mu.Unlock()
	time.Sleep(c.lat)
	c.mu.Lock()
	c.at--
	c.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// A bucket whose rate, at the answers' latency, keeps as many requests at
// work as its burst (50/s, burst 5, 100 ms) refuses the first flights past
// its burst as a cap of 5 or 6 would: it is taken for one, until the first
// throttle under that cap, which a cap would not send, gives the key its
// pace back, uncut by that throttle (the cap sent it, not the pace), and
// the rule up for good. With 8 workers: 0.931 with bare 429s before the
// rule, 0.839 when that throttle cut the pace, 0.909 now; 0.337, 0.346
// and 0.706 with Retry-After. A bucket that keeps fewer at work than its
// burst (20/s, burst 10) is not taken for a cap: 0.934 and 0.714 before,
// 0.986 and 0.800 now (a strike's try no longer lets a bunch out at its
// answer: see strikes).
func TestABucketIsNotTakenForAConcurrencyLimit(t *testing.T) {
	for _, c := range []struct {
		name         string
		limit, burst int
		d            fakeserver.Dialect
		floor        float64
	}{
		{"50/s-burst-5/bare", 50, 5, fakeserver.Bare{}, 0.85},
		// Retry-After only, over answers of 100 ms: see README, not there yet.
		{"50/s-burst-5/retry-after", 50, 5, fakeserver.RetryAfterSeconds{}, 0.65},
		{"20/s-burst-10/bare", 20, 10, fakeserver.Bare{}, 0.90},
		{"20/s-burst-10/retry-after", 20, 10, fakeserver.RetryAfterSeconds{}, 0.68},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sh := fakeserver.Shape{Name: c.name, Rate: float64(c.limit), Burst: c.burst,
					Config: fakeserver.Config{Algorithm: fakeserver.TokenBucket, Limit: c.limit, Window: time.Second, Burst: c.burst, Dialect: c.d,
						Faults: fakeserver.Faults{Latency: 100 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1}}}
				srv := fakeserver.New(sh.Config)
				r := runShape(t, sh, srv, srv.Transport(), "http://api.test", c.burst+20*c.limit, 8)
				t.Log(r)
				if r.efficiency < c.floor {
					t.Errorf("efficiency %.3f, want at least %.2f", r.efficiency, c.floor)
				}
				if r.ignored != 0 {
					t.Errorf("%d sent inside a wait after it came", r.ignored)
				}
			})
		})
	}
}

// BenchmarkConcurrencyLimit runs TestAConcurrencyLimitIsLearned's server
// over loopback: 5 requests at work at once, answers of 100 ms, 500
// requests (10 s at the least), and reports the efficiency, the throttles
// and the requests sent inside a wait after it was read.
//
//	go test -run '^$' -bench ConcurrencyLimit -benchtime 1x .
func BenchmarkConcurrencyLimit(b *testing.B) {
	for _, d := range []struct {
		name string
		d    fakeserver.Dialect
	}{{"bare", fakeserver.Bare{}}, {"retry-after", fakeserver.RetryAfterSeconds{}}} {
		for _, workers := range []int{8, 32} {
			b.Run(fmt.Sprintf("%s/workers=%d", d.name, workers), func(b *testing.B) {
				const limit, n, lat = 5, 500, 100 * time.Millisecond
				var eff, throttled, known float64
				for range b.N {
					sh := fakeserver.Shape{Name: "concurrency", Rate: limit / lat.Seconds(), Burst: limit,
						Config: fakeserver.Config{Limit: 1 << 20, Burst: 1 << 20, Window: time.Second, MaxInFlight: limit,
							Dialect: d.d, Faults: fakeserver.Faults{Latency: lat}}}
					fs, err := fakeserver.Start(sh.Config)
					if err != nil {
						b.Fatal(err)
					}
					base := &http.Transport{MaxIdleConnsPerHost: workers}
					r := runShape(b, sh, fs.Server, base, fs.URL, n, workers)
					fs.Close()
					base.CloseIdleConnections()
					eff += (n * lat / limit).Seconds() / r.elapsed.Seconds()
					throttled += float64(r.throttled)
					known += float64(r.known)
				}
				b.ReportMetric(eff/float64(b.N), "efficiency")
				b.ReportMetric(throttled/float64(b.N), "throttled/op")
				b.ReportMetric(known/float64(b.N), "known-early/op")
			})
		}
	}
}
