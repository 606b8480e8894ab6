package bench

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

var (
	shapes   = flag.Bool("shapes", false, "run the loopback shapes (minutes of real time)")
	runs     = flag.Int("runs", 3, "runs of each shape, worker count and configuration")
	parallel = flag.Int("parallel", 4, "shape runs at once")
	only     = flag.String("only", "", "run only the shapes whose names contain this")
)

// TestShapes runs headway over real loopback against the servers of
// fakeserver.RoundedShapes (with no limit and with the published one) and
// fakeserver.SparseShapes and AlgorithmShapes (with no limit), with 8 and
// 32 workers, each
// -runs times, and prints the table; with -write it writes shapes.md, which
// TestTable -write puts into BENCHMARKS.md:
//
//	go test -run TestShapes -shapes -v -write
//
// -only runs the shapes whose names contain it (not with -write).
func TestShapes(t *testing.T) {
	if !*shapes {
		t.Skip("real time: run with -shapes")
	}
	type job struct {
		sh      fakeserver.Shape
		n       int
		workers int
		limited bool
	}
	var jobs []job
	for range *runs {
		for _, sh := range fakeserver.RoundedShapes() {
			if !strings.Contains(sh.Name, *only) {
				continue
			}
			for _, limited := range []bool{false, true} {
				for _, w := range []int{8, 32} {
					jobs = append(jobs, job{sh, ShapeN(sh), w, limited})
				}
			}
		}
		for _, sh := range append(fakeserver.SparseShapes(), fakeserver.AlgorithmShapes()...) {
			if !strings.Contains(sh.Name, *only) {
				continue
			}
			for _, n := range ShapeNs(sh) {
				for _, w := range []int{8, 32} {
					jobs = append(jobs, job{sh, n, w, false})
				}
			}
		}
	}
	began := time.Now()
	results := make([]ShapeResult, len(jobs))
	sem := make(chan struct{}, max(*parallel, 1))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := RunShape(j.sh, j.n, j.workers, j.limited)
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
			t.Logf("%s/n=%d/%d/limit=%v: efficiency %.3f (%v), %d throttled (at most %d a window after the first), "+
				"%d reached the server inside an announced wait (%d after it left), %d sent after headway had it, %d failed",
				j.sh.Name, j.n, j.workers, j.limited, r.Efficiency, r.Elapsed.Round(time.Millisecond), r.Throttled, r.Worst,
				r.Early, r.Ignored, r.Known, r.Failed)
		})
	}
	wg.Wait()
	took := time.Since(began)
	table := ShapeTable(results)
	fmt.Print(table)
	if *write && *only == "" {
		m := CurrentMachine()
		doc := fmt.Sprintf("%s\nEach cell is three runs, side by side. Made with `cd bench && go test -run TestShapes -shapes -v -write` "+
			"(%d runs at once, %v of wall-clock time) on a machine with %d CPUs, %s, %s, %s, shared with other work while it ran.\n",
			table, *parallel, took.Round(time.Second), m.CPUs, m.CPU, m.OS, m.GoVersion)
		if err := os.WriteFile("shapes.md", []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
