package bench

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// A Scenario is the workload: N GETs sent by Workers goroutines, each one
// after the other, to a server that admits Rate requests per second with
// the given Burst.
type Scenario struct {
	N, Workers, Rate, Burst int
}

// DefaultScenario is the one of BENCHMARKS.md.
var DefaultScenario = Scenario{N: 2000, Workers: 32, Rate: 50, Burst: 10}

// A DialectCase is the fake server speaking one provider's dialect.
type DialectCase struct {
	Name      string
	Dialect   fakeserver.Dialect
	Algorithm fakeserver.Algorithm
}

// Dialects are the servers of the table.
var Dialects = []DialectCase{
	{Name: "bare", Dialect: fakeserver.Bare{}},
	{Name: "retry-after", Dialect: fakeserver.RetryAfterSeconds{}},
	{Name: "ietf-11", Dialect: fakeserver.IETF{}},
	{Name: "ietf-06", Dialect: fakeserver.IETF06{}},
	{Name: "github", Dialect: fakeserver.GitHub{}},
	{Name: "openai", Dialect: fakeserver.OpenAI{}},
	{Name: "shopify", Dialect: fakeserver.Shopify{}, Algorithm: fakeserver.LeakyBucket},
	{Name: "discord", Dialect: fakeserver.Discord{}},
}

// ServerConfig is the fake server of a run: the scenario's limit in the
// dialect, with 5 to 10 ms of latency per response (seeded, so repeatable).
func ServerConfig(d DialectCase, s Scenario) fakeserver.Config {
	return fakeserver.Config{
		Algorithm: d.Algorithm,
		Limit:     s.Rate, Window: time.Second, Burst: s.Burst,
		Dialect: d.Dialect,
		Faults:  fakeserver.Faults{Latency: 5 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1},
	}
}

// Result is what one contender did in one dialect.
type Result struct {
	Dialect, Contender string
	Scenario           Scenario
	Elapsed            time.Duration // from the first request to the last answer
	OK                 int           // requests that ended in a 200
	Failed             int           // requests handed back as an error or another status
	Sent               int64         // requests the server received, retries included
	Throttled          int64         // throttled responses the server sent (429, GitHub's 403)
	Early              int64         // requests that arrived while their key was told to wait
	Peak               int           // the most requests admitted in any one second
}

// Least is the least time in which the server could admit r.OK requests:
// the burst at once, the rest at the rate.
func (r Result) Least() time.Duration {
	n := r.OK - r.Scenario.Burst
	if n < 0 {
		n = 0
	}
	return time.Duration(n) * time.Second / time.Duration(r.Scenario.Rate)
}

// Efficiency is Least over Elapsed, times the share of the requests that
// succeeded: 1 is every request through, as fast as the server allows.
// Weighing by the share that succeeded keeps a client that gives up at once
// from scoring well by finishing early.
func (r Result) Efficiency() float64 {
	if r.Elapsed <= 0 || r.Scenario.N <= 0 {
		return 0
	}
	return r.Least().Seconds() / r.Elapsed.Seconds() * float64(r.OK) / float64(r.Scenario.N)
}

// Run sends s.N GETs through c's client over base to srv, from s.Workers
// goroutines, and counts what happened. A request the client hands back
// failed is not sent again by the caller: the client's own retries are all
// it gets. Run it inside a synctest bubble with srv.Transport() as base for
// virtual time, or over a loopback connection for real time.
func Run(c Contender, d DialectCase, s Scenario, srv *fakeserver.Server, base http.RoundTripper, url string) Result {
	client := c.New(base, s.Rate, s.Burst)
	start := time.Now()
	w := drive(client, url, s.N, s.Workers)
	client.CloseIdleConnections()
	st := srv.Stats()
	return Result{
		Dialect: d.Name, Contender: c.Name, Scenario: s,
		Elapsed:   w.last.Sub(start),
		OK:        w.ok,
		Failed:    w.failed,
		Sent:      st.Total,
		Throttled: st.Rejected,
		Early:     st.Early,
		Peak:      srv.PeakRate(time.Second),
	}
}

// Table renders results as one markdown table, a row per dialect and
// contender.
func Table(results []Result) string {
	var b strings.Builder
	b.WriteString("| dialect | contender | efficiency | time | 429s (or 403s) | sent during a pause | failed | requests sent | peak/s |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for i, r := range results {
		d := r.Dialect
		if i > 0 && results[i-1].Dialect == d {
			d = ""
		}
		fmt.Fprintf(&b, "| %s | %s | %.3f | %.1f s | %d | %d | %d | %d | %d |\n",
			d, r.Contender, r.Efficiency(), r.Elapsed.Seconds(), r.Throttled, r.Early, r.Failed, r.Sent, r.Peak)
	}
	return b.String()
}

// work is what the workers of drive did.
type work struct {
	ok, failed   int
	last         time.Time // when the last answer came
	firstFailure string    // why the first failed request failed
}

// drive sends n GETs of url through client from workers goroutines, each
// one after the other, and counts what happened. A request the client hands
// back failed is not sent again.
func drive(client *http.Client, url string, n, workers int) work {
	var (
		next atomic.Int64
		mu   sync.Mutex
		w    work
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				resp, err := client.Get(url)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				switch {
				case err == nil && resp.StatusCode == http.StatusOK:
					w.ok++
				case w.firstFailure == "" && err != nil:
					w.failed++
					w.firstFailure = err.Error()
				case w.firstFailure == "":
					w.failed++
					w.firstFailure = resp.Status
				default:
					w.failed++
				}
				w.last = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return w
}
