package bench

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

var (
	write = flag.Bool("write", false, "write the table to ../BENCHMARKS.md")
	n     = flag.Int("n", DefaultScenario.N, "requests per run")
)

// runVirtual runs c against a fresh server in d inside a synctest bubble,
// over the server's in-memory transport: the clock is virtual, so a run of
// a minute takes a fraction of a second and does not depend on the machine.
func runVirtual(t *testing.T, c Contender, d DialectCase, s Scenario) Result {
	var r Result
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(ServerConfig(d, s))
		r = Run(c, d, s, srv, srv.Transport(), "http://api.test/items")
	})
	return r
}

// TestTable runs every contender in every dialect and prints the table;
// with -write it writes BENCHMARKS.md at the repository root:
//
//	go test -run TestTable -v -write
func TestTable(t *testing.T) {
	s := DefaultScenario
	s.N = *n
	began := time.Now()
	var results []Result
	for _, d := range Dialects {
		for _, c := range Contenders {
			t.Run(d.Name+"/"+c.Name, func(t *testing.T) {
				r := runVirtual(t, c, d, s)
				if r.OK+r.Failed != s.N {
					t.Errorf("%d ok + %d failed, want %d requests", r.OK, r.Failed, s.N)
				}
				results = append(results, r)
			})
		}
	}
	took := time.Since(began)
	table := Table(results)
	fmt.Print(table)
	t.Logf("the table took %v", took.Round(100*time.Millisecond))
	if *write {
		doc := Report(results, s, CurrentMachine(), took)
		if old, err := os.ReadFile("../BENCHMARKS.md"); err == nil {
			if sec := OutageSection(string(old)); sec != "" {
				doc = strings.TrimRight(doc, "\n") + "\n\n" + sec // the outage rows are made apart
			}
		}
		if err := os.WriteFile("../BENCHMARKS.md", []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSmoke checks that every contender gets a short run through the server
// in two dialects, and that headway keeps its promises there: no throttle
// when it knows the limit, nothing sent during a pause unless it has only
// throttles to learn from, no request failed.
func TestSmoke(t *testing.T) {
	s := Scenario{N: 100, Workers: 8, Rate: 50, Burst: 10}
	for _, d := range []DialectCase{Dialects[1], Dialects[2]} {
		for _, c := range Contenders {
			t.Run(d.Name+"/"+c.Name, func(t *testing.T) {
				r := runVirtual(t, c, d, s)
				if r.OK+r.Failed != s.N || r.Sent < int64(r.OK) {
					t.Fatalf("inconsistent counts: %+v", r)
				}
				if r.Elapsed <= 0 || r.Efficiency() > 1.01 {
					t.Errorf("impossible timing: elapsed %v, efficiency %.3f", r.Elapsed, r.Efficiency())
				}
				if c.Name == "headway (limit)" && r.Throttled != 0 {
					t.Errorf("headway with the limit was throttled %d times", r.Throttled)
				}
				// Without a limit and without headers, headway learns from
				// throttles, and requests already in flight arrive early.
				headway, learns := c.Name[:7] == "headway", c.Name == "headway (no limit)" && d.Name == "retry-after"
				if headway && (r.Failed != 0 || r.Early != 0 && !learns) {
					t.Errorf("headway: %d early, %d failed", r.Early, r.Failed)
				}
			})
		}
	}
}
