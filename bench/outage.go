package bench

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// An OutageScenario is the workload of the outage rows: N GETs sent by
// Workers goroutines, each one after the other, to a server that admits
// Rate requests a second with the given Burst and is down for For, After
// the first request; every attempt gives up after Timeout without
// response headers (http.Transport.ResponseHeaderTimeout).
type OutageScenario struct {
	N, Workers, Rate, Burst int
	After, For, Timeout     time.Duration
}

// DefaultOutage is the scenario of issue 11: 8 workers, 600 GETs, 3 s of
// outage, a 200 ms timeout.
var DefaultOutage = OutageScenario{N: 600, Workers: 8, Rate: 100, Burst: 10,
	After: 2 * time.Second, For: 3 * time.Second, Timeout: 200 * time.Millisecond}

// Least is the least time in which the server can admit n requests: at its
// pace, less the burst it admits at once; and, for those that do not fit
// before the outage, the outage too, less the burst it admits again after
// it (its bucket refills meanwhile).
func (s OutageScenario) Least(n int) time.Duration {
	at := func(k int) time.Duration { return time.Duration(max(k, 0)) * time.Second / time.Duration(s.Rate) }
	if before := s.Burst + int(s.After*time.Duration(s.Rate)/time.Second); n <= before {
		return at(n - s.Burst)
	}
	return s.For + at(n-2*s.Burst)
}

// An OutageShapeCase is one way the server fails during the outage.
type OutageShapeCase struct {
	Name  string
	Shape fakeserver.OutageShape
}

// OutageShapes are the outages of the table.
var OutageShapes = []OutageShapeCase{
	{Name: "500s", Shape: fakeserver.OutageError},
	{Name: "connection resets", Shape: fakeserver.OutageReset},
	{Name: "hangs past the timeout", Shape: fakeserver.OutageHang},
}

// outageStatuses are the statuses the configurations retry.
var outageStatuses = []int{429, 500, 502, 503, 504}

// OutageContenders are the clients of the outage rows, configured as issue
// 11 measured them: 30 attempts, retrying 429 and 5xx.
var OutageContenders = []Contender{
	{
		Name: "headway",
		How:  "`headway.New(base, headway.WithLimit(headway.PerSecond(rate).WithBurst(burst-1)), headway.WithRetry(headway.RetryOptions{MaxAttempts: 30, Statuses: []int{429, 500, 502, 503, 504}}))`: the outage state with its defaults (probes 200 ms ×2 up to 500 ms, each from the last failure, not jittered).",
		New:  headwayOutage(),
	},
	{
		Name: "headway + breaker (hold)",
		How:  "the same with `headway.WithBreaker(headway.BreakerSettings{Timeout: time.Second, Hold: true})`: an open breaker holds the queue behind its probe.",
		New:  headwayOutage(headway.WithBreaker(headway.BreakerSettings{Timeout: time.Second, Hold: true})),
	},
	{
		Name: "headway + breaker (fail fast)",
		How:  "the same with `headway.WithBreaker(headway.BreakerSettings{Timeout: time.Second})`, the default face: an open breaker fails the queue at once, which loses records by design.",
		New:  headwayOutage(headway.WithBreaker(headway.BreakerSettings{Timeout: time.Second})),
	},
	{
		Name: "go-retryablehttp",
		How:  "`retryablehttp.NewClient()` with `RetryMax` 30 and its other defaults (waits 1 s to 30 s, `DefaultRetryPolicy`: connection errors, 429 and 5xx but 501), through `StandardClient()`. No pacing.",
		New: func(base http.RoundTripper, _, _ int) *http.Client {
			c := retryablehttp.NewClient()
			c.HTTPClient.Transport = base
			c.RetryMax = 30
			c.Logger = nil
			return c.StandardClient()
		},
	},
	{
		Name: "failsafe-go",
		How:  "`failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().WithBackoff(time.Second, 30*time.Second).WithMaxRetries(30).Build())`. No pacing.",
		New: func(base http.RoundTripper, _, _ int) *http.Client {
			rp := failsafeRetry(30)
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, rp)}
		},
	},
	{
		Name: "failsafe-go + rate limiter",
		How:  "the same retry policy outside failsafe-go's smooth rate limiter at the server's rate (`ratelimiter.NewSmoothBuilder[*http.Response](rate, time.Second).WithMaxWaitTime(time.Minute)`): paced, as headway is.",
		New: func(base http.RoundTripper, r, _ int) *http.Client {
			rp := failsafeRetry(30)
			rl := ratelimiter.NewSmoothBuilder[*http.Response](uint(r), time.Second).
				WithMaxWaitTime(time.Minute).
				Build()
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, rp, rl)}
		},
	},
}

// headwayOutage is the headway configuration for batch work, with
// more options.
func headwayOutage(more ...headway.Option) func(http.RoundTripper, int, int) *http.Client {
	return func(base http.RoundTripper, r, burst int) *http.Client {
		opts := append([]headway.Option{
			headway.WithLimit(headway.PerSecond(r).WithBurst(burst - 1)),
			headway.WithRetry(headway.RetryOptions{MaxAttempts: 30, Statuses: outageStatuses}),
		}, more...)
		return &http.Client{Transport: headway.New(base, opts...)}
	}
}

// OutageResult is what one contender did in one outage.
type OutageResult struct {
	Shape, Contender string
	Scenario         OutageScenario
	Elapsed          time.Duration // from the first request to the last answer
	OK, Failed       int
	Sent             int64         // requests the server received, retries included
	IntoOutage       int64         // requests that arrived during the outage
	Attempts         int64         // requests the client handed to its http.Transport during the outage
	Throttled        int64         // 429s the server sent
	Resume           time.Duration // from the end of the outage to the first request admitted after it
	FirstFailure     string        // why the first failed request failed
}

// Efficiency is the least time in which the server could admit the
// requests that succeeded over Elapsed, times the share of the requests
// that succeeded: 1 is every request through, as fast as the server and
// the outage allow.
func (r OutageResult) Efficiency() float64 {
	if r.Elapsed <= 0 || r.Scenario.N <= 0 {
		return 0
	}
	return r.Scenario.Least(r.OK).Seconds() / r.Elapsed.Seconds() * float64(r.OK) / float64(r.Scenario.N)
}

// RunOutage runs c through one outage of the given shape, over a real
// loopback connection to a fresh fake server: real time, so it takes
// about ten seconds.
func RunOutage(c Contender, shape OutageShapeCase, s OutageScenario) (OutageResult, error) {
	var (
		mu       sync.Mutex
		resumed  time.Time
		downTo   time.Time
		admitted = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := time.Now()
			mu.Lock()
			if resumed.IsZero() && !downTo.IsZero() && !now.Before(downTo) {
				resumed = now
			}
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ok":true}`+"\n")
		})
	)
	fs, err := fakeserver.Start(fakeserver.Config{
		Limit: s.Rate, Window: time.Second, Burst: s.Burst,
		Handler: admitted,
		Faults: fakeserver.Faults{Outage: shape.Shape, Latency: 5 * time.Millisecond,
			Jitter: 5 * time.Millisecond, Seed: 1},
	})
	if err != nil {
		return OutageResult{}, err
	}
	defer fs.Close()
	tr := &http.Transport{ResponseHeaderTimeout: s.Timeout, MaxIdleConnsPerHost: 2 * s.Workers}
	defer tr.CloseIdleConnections()
	start := time.Now()
	from, to := start.Add(s.After), start.Add(s.After+s.For)
	base := &countRT{base: tr, from: from, to: to}
	client := c.New(base, s.Rate, s.Burst)

	mu.Lock()
	downTo = to
	mu.Unlock()
	fs.Server.SetOutage(from, to)
	w := drive(client, fs.URL+"/items", s.N, s.Workers)
	client.CloseIdleConnections()
	st := fs.Server.Stats()
	mu.Lock()
	defer mu.Unlock()
	r := OutageResult{
		Shape: shape.Name, Contender: c.Name, Scenario: s,
		Elapsed: w.last.Sub(start), OK: w.ok, Failed: w.failed,
		Sent: st.Total, IntoOutage: st.Outage, Attempts: base.n.Load(), Throttled: st.Rejected,
		FirstFailure: w.firstFailure,
	}
	if !resumed.IsZero() {
		r.Resume = resumed.Sub(to)
	}
	return r, nil
}

// countRT counts the requests handed to base in [from, to).
type countRT struct {
	base     *http.Transport
	from, to time.Time
	n        atomic.Int64
}

func (c *countRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if now := time.Now(); !now.Before(c.from) && now.Before(c.to) {
		c.n.Add(1)
	}
	return c.base.RoundTrip(req)
}

func (c *countRT) CloseIdleConnections() { c.base.CloseIdleConnections() }

// OutageTable renders outage results as a markdown table, a row per shape
// and contender.
func OutageTable(results []OutageResult) string {
	var b strings.Builder
	b.WriteString("| outage | contender | efficiency | time | sent into the outage (server) | attempts into it (client) | failed | first success after it | 429s | requests sent |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for i, r := range results {
		sh := r.Shape
		if i > 0 && results[i-1].Shape == sh {
			sh = ""
		}
		fmt.Fprintf(&b, "| %s | %s | %.3f | %.1f s | %d | %d | %d | +%d ms | %d | %d |\n",
			sh, r.Contender, r.Efficiency(), r.Elapsed.Seconds(), r.IntoOutage, r.Attempts, r.Failed,
			r.Resume.Milliseconds(), r.Throttled, r.Sent)
	}
	return b.String()
}
