package sharedquota

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// bare503 rejects with a 503 that names no delay: nginx's limit_req, by
// default (the root's overload rule: see headway's overload.go).
type bare503 struct{}

func (bare503) Header(http.Header, fakeserver.State) {}
func (bare503) Reject(http.Header, fakeserver.State) fakeserver.Rejection {
	return fakeserver.Rejection{Status: http.StatusServiceUnavailable}
}

// flood503 is what a fleet (or one process) met from a server that
// answers its floods with 503s.
type flood503 struct {
	st        fakeserver.Stats
	ok        int64
	took, min time.Duration
	line      string
}

// run503 sends n requests to a server of alg at rate a second, burst rate,
// answering 20 ms late, that refuses with bare 503s, from procs processes
// of workers goroutines each (alone: sharing nothing), no limits
// configured, each request retried until it goes through.
func run503(tb testing.TB, alg fakeserver.Algorithm, rate, n, procs, workers int, alone bool) flood503 {
	tb.Helper()
	srv := fakeserver.New(fakeserver.Config{
		Algorithm: alg, Limit: rate, Window: time.Second, Burst: rate, Dialect: bare503{},
		Faults: fakeserver.Faults{Latency: 20 * time.Millisecond},
	})
	run := runUnlimited(tb, srv, n, procs, workers, alone, 2*time.Minute)
	var out flood503
	out.ok, out.took, out.st = run.ok, run.took, srv.Stats()
	out.min = time.Duration(float64(n-rate) / float64(rate) * float64(time.Second))
	if os.Getenv("FLEET_TIMELINE") != "" {
		out.line = run.tl.show(run.start)
	}
	return out
}

// BenchmarkFleet503Floods runs 3 processes of 4 workers (and one of 12
// alone, for comparison), no limits configured, sharing, 300 requests
// against a bucket of 20/s burst 20 and fixed windows of 20/s that answer
// what they refuse with a 503 naming no delay, 20 ms late. It reports the
// 503s met, the requests answered, and the efficiency (least time over
// time taken). Run with
//
//	go test -run '^$' -bench Fleet503Floods -benchtime 1x .
func BenchmarkFleet503Floods(b *testing.B) {
	for _, alg := range []struct {
		name string
		alg  fakeserver.Algorithm
	}{{"tb20", fakeserver.TokenBucket}, {"fw20", fakeserver.FixedWindow}} {
		for _, alone := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/alone=%v", alg.name, alone), func(b *testing.B) {
				for range b.N {
					procs, workers := 3, 4
					if alone {
						procs, workers = 1, 12
					}
					r := run503(b, alg.alg, 20, 300, procs, workers, alone)
					b.ReportMetric(float64(r.st.Rejected), "503s")
					b.ReportMetric(float64(r.ok), "answered")
					b.ReportMetric(r.min.Seconds()/r.took.Seconds(), "efficiency")
					if dir := os.Getenv("FLEET_TIMELINE"); dir != "" {
						name := strings.NewReplacer("/", "_", "=", "").Replace(b.Name())
						_ = os.WriteFile(dir+"/"+name+".txt", []byte(r.line+"\n"), 0o644)
					}
				}
			})
		}
	}
}
