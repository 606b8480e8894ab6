package bench

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// ShapeResult is one run of headway against a fakeserver.Shape.
type ShapeResult struct {
	Shape      fakeserver.Shape
	Workers    int
	Limited    bool // the published limit was configured
	N          int
	Elapsed    time.Duration // from the first request to the last answer
	Efficiency float64       // the shape's least time for N with Workers (LeastFor) over Elapsed
	Throttled  int64         // throttled responses the server sent
	Early      int64         // requests that reached the server inside a wait it had announced
	Ignored    int64         // of them, those that reached it after the announcement left it
	// Known is the number of requests headway sent (handed to its base)
	// inside a wait after the rejection that named it had reached headway:
	// what a client can be held to. Ignored counts from when the rejection
	// left the server instead, and on a loaded machine the client reads it
	// later (see fakeserver.Observer).
	Known int64
	// Worst is the most throttles in one window after the first (the
	// server's fixed windows, or seconds; fakeserver.Observer.WorstWindow).
	Worst  int
	Failed int64 // requests that never got a 200 (errors)
}

// RunShape starts sh's server on loopback and sends n GETs to its paths in
// turn, from workers goroutines, through one http.Client over a headway
// Transport (with the shape's published limit if limited, else none). A
// request handed back throttled is sent again by its worker, so that every
// one gets through and the run measures the pace.
func RunShape(sh fakeserver.Shape, n, workers int, limited bool) (ShapeResult, error) {
	fs, err := fakeserver.Start(sh.Config)
	if err != nil {
		return ShapeResult{}, err
	}
	defer fs.Close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = workers
	defer base.CloseIdleConnections()
	var opts []headway.Option
	if limited {
		p := sh.Published
		opts = append(opts, headway.WithLimit(headway.Per(p.Count, p.Period).WithBurst(p.Burst)))
	}
	obs := fakeserver.NewObserver(fs.Server, base)
	client := &http.Client{Transport: headway.New(obs, opts...)}
	paths := sh.Paths
	if len(paths) == 0 {
		paths = []string{"/items"}
	}
	var next, failed atomic.Int64
	var mu sync.Mutex
	var last time.Time
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				for attempt := 0; ; attempt++ {
					resp, err := client.Get(fs.URL + paths[int(i-1)%len(paths)])
					if err != nil {
						failed.Add(1)
						break
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK || attempt == 20 {
						break
					}
				}
				mu.Lock()
				last = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st := fs.Server.Stats()
	r := ShapeResult{Shape: sh, Workers: workers, Limited: limited, N: n, Elapsed: last.Sub(start),
		Throttled: st.Rejected, Early: st.Early, Ignored: st.Ignored, Known: obs.Known(), Worst: obs.WorstWindow(start),
		Failed: failed.Load()}
	r.Efficiency = sh.LeastFor(n, workers, start).Seconds() / r.Elapsed.Seconds()
	return r, nil
}

// ShapeN is the number of requests of a run against sh: about 12 s of
// the server's pace after its burst.
func ShapeN(sh fakeserver.Shape) int { return sh.Burst + int(12*sh.Rate) }

// ShapeNs are the lengths of the runs against sh: ShapeN (a minute of
// its pace for a server whose clock drifts), and for a
// server that says nothing but Retry-After, 80 s of its pace too. Each of
// its throttles costs the refill its bucket cannot hold while the key
// waits (a second of 20/s less a burst of 10: 10 requests), and a key that
// knows no limit is throttled twice at least (once to find a limit, once to
// measure it): at most 12/13 = 0.923 of the least time at ShapeN, 0.988
// over 80 s (see TestSparseShapes in the root module).
func ShapeNs(sh fakeserver.Shape) []int {
	if sh.Config.ClockDrift != 0 {
		// A drift shows over time: a minute of the server's pace.
		return []int{sh.Burst + int(60*sh.Rate)}
	}
	if sh.Name == "retry-after-only" {
		return []int{ShapeN(sh), sh.Burst + int(80*sh.Rate)}
	}
	return []int{ShapeN(sh)}
}

// ShapeTable renders results as one markdown table: a row per shape,
// configuration, run length and worker count, its runs side by side.
func ShapeTable(results []ShapeResult) string {
	type row struct {
		name    string
		workers int
		limited bool
		n       int
	}
	byRow := map[row][]ShapeResult{}
	order := map[string]int{} // the shapes in the order they first ran
	var rows []row
	for _, r := range results {
		k := row{r.Shape.Name, r.Workers, r.Limited, r.N}
		if byRow[k] == nil {
			rows = append(rows, k)
		}
		if _, ok := order[k.name]; !ok {
			order[k.name] = len(order)
		}
		byRow[k] = append(byRow[k], r)
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch {
		case a.name != b.name:
			return order[a.name] < order[b.name]
		case a.limited != b.limited:
			return !a.limited
		case a.n != b.n:
			return a.n < b.n
		}
		return a.workers < b.workers
	})
	var b strings.Builder
	b.WriteString("| server | workers | client limit | efficiency | throttled | most in a window after the first | sent inside a known wait | requests |\n")
	b.WriteString("|---|--:|---|---|---|---|---|--:|\n")
	for i, k := range rows {
		rs := byRow[k]
		name := "`" + k.name + "`"
		if i > 0 && rows[i-1].name == k.name {
			name = ""
		}
		lim := "none"
		if k.limited {
			p := rs[0].Shape.Published
			lim = fmt.Sprintf("%d per %v, burst %d", p.Count, p.Period, p.Burst)
		}
		var eff, thr, worst, known []string
		for _, r := range rs {
			eff = append(eff, fmt.Sprintf("%.3f", r.Efficiency))
			thr = append(thr, fmt.Sprint(r.Throttled))
			worst = append(worst, fmt.Sprint(r.Worst))
			known = append(known, fmt.Sprint(r.Known))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %d |\n", name, k.workers, lim,
			strings.Join(eff, " / "), strings.Join(thr, " / "), strings.Join(worst, " / "), strings.Join(known, " / "), rs[0].N)
	}
	return b.String()
}
