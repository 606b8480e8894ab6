package headway_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// dialectCase is a fake server that speaks one provider's dialect.
type dialectCase struct {
	name    string
	dialect fakeserver.Dialect
	skew    time.Duration
	states  bool    // the dialect announces what remains
	minEff  float64 // the target
	floor   float64 // where it stands now
	obeys   bool    // no request early, at most one throttle per window
}

var dialectCases = []dialectCase{
	{name: "bare", dialect: fakeserver.Bare{}, minEff: 0.80, floor: 0.98},
	{name: "retry-after", dialect: fakeserver.RetryAfterSeconds{}, minEff: 0.80, floor: 0.88},
	{name: "retry-after-date-skewed", dialect: fakeserver.RetryAfterDate{}, skew: 97 * time.Second, minEff: 0.80, floor: 0.91},
	{name: "ietf-11", dialect: fakeserver.IETF{}, states: true, minEff: 0.95, floor: 0.99, obeys: true},
	{name: "ietf-06", dialect: fakeserver.IETF06{}, states: true, minEff: 0.95, floor: 0.98, obeys: true},
	{name: "github", dialect: fakeserver.GitHub{}, states: true, minEff: 0.95, floor: 0.98, obeys: true},
	{name: "github-secondary", dialect: fakeserver.GitHub{Secondary: true}, states: true, minEff: 0.95, floor: 0.98, obeys: true},
	{name: "openai", dialect: fakeserver.OpenAI{}, states: true, minEff: 0.95, floor: 0.99, obeys: true},
	{name: "shopify", dialect: fakeserver.Shopify{}, states: true, minEff: 0.95, floor: 0.97, obeys: true},
	{name: "discord", dialect: fakeserver.Discord{}, states: true, minEff: 0.95, floor: 0.99, obeys: true},
}

// dialectResult is what one run of n requests did.
type dialectResult struct {
	n          int
	elapsed    time.Duration // from the first request to the last response
	least      time.Duration // the least time the server could admit n in
	rejected   int64         // throttled responses the server sent
	early      int64         // requests sent while told to wait
	finals     int64         // throttled responses that reached the caller
	efficiency float64
}

func (r dialectResult) String() string {
	return fmt.Sprintf("efficiency %.3f (%v for %d, least %v), %d throttled, %d early, %d handed back",
		r.efficiency, r.elapsed.Round(time.Millisecond), r.n, r.least.Round(time.Millisecond), r.rejected, r.early, r.finals)
}

// runDialect sends n GETs from workers goroutines through a headway
// Transport with no limit configured, over base, to srv, which admits rate
// requests per second with the given burst. A request that comes back
// throttled is sent again by its worker, so that every one gets through.
func runDialect(tb testing.TB, srv *fakeserver.Server, base http.RoundTripper, url string, n, workers, rate, burst int) dialectResult {
	tr := headway.New(base)
	client := &http.Client{Transport: tr}
	var finals atomic.Int64
	start := time.Now()
	var mu sync.Mutex
	var last time.Time
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				for {
					resp, err := client.Get(url)
					if err != nil {
						tb.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
					finals.Add(1)
				}
				mu.Lock()
				last = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st := srv.Stats()
	r := dialectResult{
		n:        n,
		elapsed:  last.Sub(start),
		least:    time.Duration(n-burst) * time.Second / time.Duration(rate),
		rejected: st.Rejected,
		early:    st.Early,
		finals:   finals.Load(),
	}
	r.efficiency = r.least.Seconds() / r.elapsed.Seconds()
	return r
}

func newDialectServer(c dialectCase, rate, burst int) fakeserver.Config {
	return fakeserver.Config{
		Limit: rate, Window: time.Second, Burst: burst,
		Dialect: c.dialect, ClockSkew: c.skew,
		Faults: fakeserver.Faults{Latency: 5 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1},
	}
}

// TestAdaptsToEveryDialect runs 2,000 requests against a server of 50
// requests a second, burst 10, in each dialect, with no limit on the
// client: headway must pace itself from what the server says alone. It
// runs in virtual time, so the efficiency it measures is exact and the same
// on every machine.
func TestAdaptsToEveryDialect(t *testing.T) {
	const n, workers, rate, burst = 2000, 32, 50, 10
	for _, c := range dialectCases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fakeserver.New(newDialectServer(c, rate, burst))
				r := runDialect(t, srv, srv.Transport(), "http://api.test/items", n, workers, rate, burst)
				t.Log(r)
				// Every request got through, through the server's limit.
				if got := srv.Stats().Admitted; got != n {
					t.Errorf("server admitted %d, want %d", got, n)
				}
				if srv.PeakRate(time.Second) > rate+burst {
					t.Errorf("peak %d in a second, above what the server allows", srv.PeakRate(time.Second))
				}
				// The targets are efficiency at least minEff, no request sent
				// during a pause, one throttle per window at most. floor
				// guards against regressions from where the pacing stands;
				// obeys marks the dialects that meet the other two.
				if r.efficiency < c.floor {
					t.Errorf("efficiency %.3f fell below %.2f", r.efficiency, c.floor)
				}
				if c.obeys {
					if r.early != 0 {
						t.Errorf("%d requests sent while told to wait", r.early)
					}
					if windows := int64(r.elapsed/time.Second) + 1; r.rejected > windows {
						t.Errorf("%d throttled in %d windows", r.rejected, windows)
					}
				}
			})
		})
	}
}

// BenchmarkDialects is the same run over a real loopback connection, in
// real time: 1,000 requests at 50 a second, about 20 s a dialect. It
// reports efficiency, throttled responses and requests sent during a pause
// for each dialect.
func BenchmarkDialects(b *testing.B) {
	const n, workers, rate, burst = 1000, 32, 50, 10
	for _, c := range dialectCases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				fs, err := fakeserver.Start(newDialectServer(c, rate, burst))
				if err != nil {
					b.Fatal(err)
				}
				base := http.DefaultTransport.(*http.Transport).Clone()
				base.MaxIdleConnsPerHost = workers
				r := runDialect(b, fs.Server, base, fs.URL+"/items", n, workers, rate, burst)
				base.CloseIdleConnections()
				fs.Close()
				b.ReportMetric(r.efficiency, "efficiency")
				b.ReportMetric(float64(r.rejected), "throttled")
				b.ReportMetric(float64(r.early), "early")
			}
		})
	}
}

// TestAdaptsToFixedWindows runs 1,000 requests against servers that count
// a fixed window (100 per 10 s, as GitHub counts its hour), with no limit
// on the client. Every request gets through at the server's full pace. The
// throttles are logged, not yet bounded: the target is one per window, met
// in most windows but not in those where answers from two windows cross
// (see the issue notes).
func TestAdaptsToFixedWindows(t *testing.T) {
	for _, c := range []struct {
		name string
		d    fakeserver.Dialect
	}{{"github", fakeserver.GitHub{}}, {"ietf-06", fakeserver.IETF06{}}, {"ietf-11", fakeserver.IETF{}}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fakeserver.New(fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 100, Window: 10 * time.Second, Dialect: c.d,
					Faults: fakeserver.Faults{Latency: 5 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1}})
				r := runDialect(t, srv, srv.Transport(), "http://api.test/items", 1000, 32, 10, 100)
				t.Log(r)
				if got := srv.Stats().Admitted; got != 1000 {
					t.Errorf("server admitted %d, want 1000", got)
				}
				if r.efficiency < 0.95 {
					t.Errorf("efficiency %.3f, want at least 0.95", r.efficiency)
				}
			})
		})
	}
}
