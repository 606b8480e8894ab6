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

// shapeResult is what one run against a fakeserver.Shape did.
type shapeResult struct {
	workers    int
	elapsed    time.Duration
	efficiency float64
	throttled  int64 // throttled responses the server sent
	early      int64 // requests sent inside a wait the server announced
	ignored    int64 // of them, those sent after the announcement reached the client
	known      int64 // of them, those sent after the client read it (fakeserver.Observer.Known)
	// worst is the most throttles in one window after the first (of the
	// server's fixed windows; its shortest, under a global one).
	worst int
}

func (r shapeResult) String() string {
	return fmt.Sprintf("%2d workers: efficiency %.3f (%v), %d throttled (at most %d a window after the first), %d sent inside an announced wait (%d after it came)",
		r.workers, r.efficiency, r.elapsed.Round(time.Millisecond), r.throttled, r.worst, r.early, r.ignored)
}

// published is the limit a user would configure for sh from its docs.
func published(sh fakeserver.Shape) headway.Limit {
	p := sh.Published
	return headway.Per(p.Count, p.Period).WithBurst(p.Burst)
}

// runShape sends n GETs from workers goroutines through a Transport made
// with opts over base to srv at url, to sh's paths in turn; a request
// handed back throttled is sent again by its worker, so that every one
// gets through.
func runShape(tb testing.TB, sh fakeserver.Shape, srv *fakeserver.Server, base http.RoundTripper, url string, n, workers int, opts ...headway.Option) shapeResult {
	obs := fakeserver.NewObserver(srv, base)
	client := &http.Client{Transport: headway.New(obs, opts...)}
	paths := sh.Paths
	if len(paths) == 0 {
		paths = []string{"/items"}
	}
	var next atomic.Int64
	var mu sync.Mutex
	var last time.Time
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				for {
					resp, err := client.Get(url + paths[int(i-1)%len(paths)])
					if err != nil {
						tb.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
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
	client.CloseIdleConnections()
	st := srv.Stats()
	// In virtual time a rejection is read as it leaves the server: the
	// server's count of requests sent after it left and the Observer's of
	// those sent after it was read agree, but the Observer sees only the
	// waits of a server that tells them.
	r := shapeResult{workers: workers, elapsed: last.Sub(start), throttled: st.Rejected, early: st.Early,
		ignored: max(st.Ignored, obs.Known()), known: obs.Known()}
	r.efficiency = sh.LeastFor(n, workers, start).Seconds() / r.elapsed.Seconds()
	r.worst = obs.WorstWindow(start)
	return r
}

// shapeCase is a shape with its targets: efficiency at least minEff, at
// most maxThrottled throttles, and no request sent inside an announced
// wait. floor is where it stands, when below the target: the test holds
// it there and logs the target.
type shapeCase struct {
	fakeserver.Shape
	n            int
	minEff       float64
	floor        float64 // 0: the target holds
	maxThrottled int64
	earlyOK      bool // requests inside an announced wait are not yet ruled out
	// windowed: of the throttles (at most maxThrottled), those of the
	// first window are allowed; at most one in each window after it.
	windowed bool
	// tail, if runs is not 0, is a known shortfall that depends on
	// goroutine order: see runTail.
	tail struct {
		runs, miss int
		throttled  int64
	}
}

func runShapeCases(t *testing.T, cases []shapeCase) {
	for _, c := range cases {
		for _, limited := range []bool{false, true} {
			if limited && c.Published.Count == 0 {
				continue // no published limit to configure
			}
			for _, workers := range []int{8, 32} {
				name := fmt.Sprintf("%s/%d", c.Name, workers)
				var opts []headway.Option
				if limited {
					name += "/limit"
					opts = append(opts, headway.WithLimit(published(c.Shape)))
				}
				t.Run(name, func(t *testing.T) {
					if c.tail.runs > 0 {
						runTail(t, c, workers, opts)
						return
					}
					synctest.Test(t, func(t *testing.T) {
						srv := fakeserver.New(c.Config)
						r := runShape(t, c.Shape, srv, srv.Transport(), "http://api.test", c.n, workers, opts...)
						t.Log(r)
						want := c.minEff
						if c.floor > 0 {
							want = c.floor
							t.Logf("target: efficiency %.2f", c.minEff)
						}
						if r.efficiency < want {
							t.Errorf("efficiency %.3f, want at least %.2f", r.efficiency, want)
						}
						if r.throttled > c.maxThrottled {
							t.Errorf("%d throttled, want at most %d", r.throttled, c.maxThrottled)
						}
						if r.early != 0 && !c.earlyOK {
							t.Errorf("%d sent inside an announced wait", r.early)
						}
						if c.windowed && r.worst > 1 {
							t.Errorf("%d throttles in one window after the first, want at most 1", r.worst)
						}
						if r.ignored != 0 {
							t.Errorf("%d sent inside an announced wait after it came", r.ignored)
						}
					})
				})
			}
		}
	}
}

// runTail runs c's shape c.tail.runs times: each run must meet the
// shape's hard bounds (efficiency, c.tail.throttled, nothing sent inside a
// wait after it came), and no more than c.tail.miss of them may miss its
// targets (c.maxThrottled, one throttle a window after the first): a
// known shortfall that depends on goroutine order, held where it stands.
func runTail(t *testing.T, c shapeCase, workers int, opts []headway.Option) {
	missed := 0
	for range c.tail.runs {
		synctest.Test(t, func(t *testing.T) {
			srv := fakeserver.New(c.Config)
			r := runShape(t, c.Shape, srv, srv.Transport(), "http://api.test", c.n, workers, opts...)
			if r.efficiency < c.minEff {
				t.Errorf("%v: efficiency %.3f, want at least %.2f", r, r.efficiency, c.minEff)
			}
			if r.throttled > c.tail.throttled {
				t.Errorf("%v: want at most %d throttled", r, c.tail.throttled)
			}
			if r.ignored != 0 {
				t.Errorf("%v: sent inside an announced wait after it came", r)
			}
			if r.throttled > c.maxThrottled || (c.windowed && r.worst > 1) {
				missed++
				t.Logf("missed the targets: %v", r)
			}
		})
	}
	t.Logf("%d of %d runs missed the targets (at most %d throttled, one a window after the first)", missed, c.tail.runs, c.maxThrottled)
	if missed > c.tail.miss {
		t.Errorf("%d of %d runs missed the targets, want at most %d", missed, c.tail.runs, c.tail.miss)
	}
}

// TestRoundedShapes runs each server of issue 15 in virtual time, with 8
// and 32 workers, 20 ms of latency and up to 5 of jitter, with no limit
// configured and with the published one: at most one throttle, none sent
// inside an announced wait, and efficiency 0.95 (0.97 for the first).
func TestRoundedShapes(t *testing.T) {
	var cases []shapeCase
	for _, sh := range fakeserver.RoundedShapes() {
		c := shapeCase{Shape: sh, n: 300, minEff: 0.95, maxThrottled: 1}
		if sh.Name == "ietf-bucket-t-rounded" {
			c.n, c.minEff = 500, 0.97
		}
		cases = append(cases, c)
	}
	runShapeCases(t, cases)
}

// TestSparseShapes runs each server of issue 12 in virtual time, with 8
// and 32 workers, with no limit configured and with the published one.
// The target is efficiency 0.95, at most one throttle per window after
// the first, and none sent inside an announced wait; where a shape is not
// there yet, the test holds it where it stands (floor, throttles) and
// logs the target.
func TestSparseShapes(t *testing.T) {
	type standing struct {
		floor     float64
		throttled int64
		early     bool
	}
	stands := map[string]standing{
		// Without a limit: 0.995-0.998; the throttles are the first window's
		// burst, sent before any answer, then at most one a window
		// (TestFixedWindowLearnedFromRetryAfterDates). With the published
		// limit: 0.911, one throttle, a window never learned from it.
		"fixed-window-date-skewed": {0.9, 20, true},
		// Efficiency holds (0.997-0.998), and at most one throttle a window
		// after the first (checked: windowed below): one in each of the two
		// windows that measure the global window, none after. In the first,
		// 2 to 6, sent while the global limit was unknown (the scope's ramp,
		// see rampStart), before its first global 429 came back: 4-8 in all.
		// Once, in about 5 % of goroutine orders with 32 workers, a bucket
		// of two routes spent early in window 0 held the key's one queue
		// for the rest of it (16-20 throttles); a bucket's wait no longer
		// holds the other routes (TestABucketSpentEarlyDoesNotHoldTheOtherRoutes).
		// The case still runs 40 times (tail below): every run holds the
		// efficiency, 12 throttles and nothing sent after a wait came; at
		// most one of the 40 may go past 10 throttles or one a window
		// (none did in 4,000 runs with -race).
		"discord-routes-global": {0, 10, true},
		// 0.910 / 0.918 (target 0.95, out of reach: at most 0.952): each
		// throttle's whole-second wait costs the refill the bucket cannot
		// hold (10 of the 400 requests past its burst), and a key that
		// knows nothing is throttled twice at least, once to find a limit
		// and once to measure it (see TestRetryAfterOnlyServers and the
		// issue's note); at most one a second after the first (windowed).
		// The row runs 80 s of work too (retry-after-only-80s below),
		// where the target holds.
		"retry-after-only": {0.90, 30, true},
		// 0.992-0.998: the throttles are the first second's (the first
		// burst, sent before any answer, and slow start), then at most one
		// a second (checked: windowed; a bucket counts no windows of its
		// own). A bare 429 names no wait: none is sent inside one the
		// client knew of.
		"bare-429": {0.95, 40, true},
	}
	var cases []shapeCase
	for _, sh := range fakeserver.SparseShapes() {
		c := shapeCase{Shape: sh, n: sh.Burst + int(20*sh.Rate), minEff: 0.95, maxThrottled: 1}
		if st, ok := stands[sh.Name]; ok {
			c.floor, c.maxThrottled, c.earlyOK = st.floor, st.throttled, st.early
		}
		if sh.Name == "discord-routes-global" {
			c.tail.runs, c.tail.miss, c.tail.throttled = 40, 1, 12
		}
		c.windowed = sh.Name == "discord-routes-global" || sh.Name == "fixed-window-date-skewed" || sh.Name == "bare-429" || sh.Name == "retry-after-only"
		cases = append(cases, c)
		if sh.Name == "retry-after-only" {
			// The same server over 80 s of work (1610 requests), where a
			// client that learns the rate can meet the target: each
			// throttle costs a second's refill less the burst, 10 requests
			// (0.5 s), and two are needed, so at most 80/(80+1) = 0.988
			// less an answer's latency. The key is throttled three or four
			// times after its first burst (its second cycle is short, half
			// a second or less, and measures the rate to about 10 %; the
			// third may let the bucket overflow and count low), then
			// probes every 50 s or more: 0.970-0.972 with 8 workers,
			// 0.968-0.972 with 32 (seeds 1-5 of the fake server's jitter),
			// and in its last 40 s 0.986-0.999. At most one throttle a
			// second after the first (windowed).
			long := c
			long.Name, long.n, long.floor = sh.Name+"-80s", sh.Burst+int(80*sh.Rate), 0
			cases = append(cases, long)
		}
	}
	runShapeCases(t, cases)
}

// TestFixedWindowEnteredLate starts the fixed-window row of issue 15 at
// several instants of the server's window (virtual time starts on a
// boundary; real runs do not), and holds the target. Two things
// cost a run a late start:
//
//   - With less than a second of the first window left, its stated reset
//     puts no upper bound on a refill rate and the model takes the window
//     for a bucket; when the boundary passes, the new window's answers
//     must lift it, or the window's quota goes unused until the next
//     boundary (efficiency 0.72-0.77, one window late).
//   - Dates have whole seconds and the first ones bound the server's clock
//     only to a second; a client that spends each window at once, at the
//     same fraction of a second, never learns more, and enters every window
//     up to a second late (0.92-0.95), unless some of its requests read
//     the clock where its second turns.
func TestFixedWindowEnteredLate(t *testing.T) {
	var sh fakeserver.Shape
	for _, s := range fakeserver.RoundedShapes() {
		if s.Name == "fixed-window-epoch-reset" {
			sh = s
		}
	}
	for _, phase := range []time.Duration{700, 1500, 2000, 2300, 2600} {
		phase *= time.Millisecond
		for _, c := range []struct {
			workers int
			opts    []headway.Option
		}{{8, nil}, {32, nil}, {8, []headway.Option{headway.WithLimit(published(sh))}}, {32, []headway.Option{headway.WithLimit(published(sh))}}} {
			workers := c.workers
			name := fmt.Sprintf("%v/%d", phase, workers)
			if c.opts != nil {
				name += "/limit"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					time.Sleep(phase)
					srv := fakeserver.New(sh.Config)
					r := runShape(t, sh, srv, srv.Transport(), "http://api.test", 150, workers, c.opts...)
					t.Log(r)
					if r.efficiency < 0.95 {
						t.Errorf("efficiency %.3f, want at least 0.95", r.efficiency)
					}
					if r.throttled > 1 || r.early != 0 {
						t.Errorf("%d throttled, %d early; want at most 1 and 0", r.throttled, r.early)
					}
				})
			})
		}
	}
}

// TestFixedWindowLearnedFromRetryAfterDates runs servers of fixed windows
// that say nothing but a Retry-After date on their 429s, on a clock that
// is not ours, with no limit configured (issue 12): the row of the issue
// (20 per 2 s, 30 s ahead) and another quota, length and skew. The key
// learns each window from the spacing of its throttles; the first window
// throttles what the first burst sent beyond its quota, and every later
// one at most once (while the window is learned), with efficiency 0.95
// and no request sent inside a wait the client knew of.
//
// The key spends each window at once, at the fraction of the server's
// second it began at, and its Dates bounded the clock only to that
// second: a run begun a quarter or 0.3 of a window in entered every
// window up to that much late (0.952-0.973). Held requests that read the
// clock just before its second turns (windowSample) narrow it: 0.971-0.998
// at every phase. The test holds 0.96.
func TestFixedWindowLearnedFromRetryAfterDates(t *testing.T) {
	for _, c := range []struct {
		limit  int
		window time.Duration
		skew   time.Duration
	}{{20, 2 * time.Second, 30 * time.Second}, {50, 5 * time.Second, -12300 * time.Millisecond}} {
		sh := fakeserver.Shape{Name: "fixed-window-retry-after-date",
			Config: fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: c.limit, Window: c.window, ClockSkew: c.skew,
				Dialect: fakeserver.RetryAfterDate{}, Faults: fakeserver.Faults{Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1}},
			Rate: float64(c.limit) / c.window.Seconds(), Burst: c.limit}
		for _, workers := range []int{8, 32} {
			for _, phase := range []time.Duration{0, c.window * 3 / 10, c.window / 4, c.window * 7 / 10} {
				t.Run(fmt.Sprintf("%d-per-%v/%d/%v", c.limit, c.window, workers, phase), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						time.Sleep(phase)
						srv := fakeserver.New(sh.Config)
						r := runShape(t, sh, srv, srv.Transport(), "http://api.test", sh.Burst+int(20*sh.Rate), workers)
						t.Log(r)
						if r.worst > 1 {
							t.Errorf("%d throttles in a window after the first, want at most 1", r.worst)
						}
						if r.efficiency < 0.96 {
							t.Errorf("efficiency %.3f, want at least 0.96", r.efficiency)
						}
						if r.ignored != 0 {
							t.Errorf("%d sent inside a wait the client knew of", r.ignored)
						}
					})
				})
			}
		}
	}
}

// TestShapesWithTheFirstFlightSpread runs the sparse and rounded shapes
// with the workers' first requests reaching the server over 100 ms, as
// opening their connections does (fakeserver.Faults.Handshake): answers
// of one flight then come back far more out of order than jitter makes
// them. Each run must end (OpenAI's bucket, taken for windows of 100 ms
// with a boundary up to 250 ms early, held every request for good), send
// nothing inside a wait it knew of, and hold the efficiency: GitHub's
// windows of 100 per 10 s came out at 0.665 when slow answers of the
// first window, counted after later requests, lowered the model and grew
// its margin, and 3 requests went into a fourth window.
func TestShapesWithTheFirstFlightSpread(t *testing.T) {
	floors := map[string]float64{
		// 0.915 / 0.913 (0.918 / 0.916 unspread); 2 throttles in a
		// second after the first with 32 workers.
		"retry-after-only": 0.90,
	}
	worst := map[string]int{"retry-after-only": 2, "bare-429": 2}
	for _, sh := range append(fakeserver.SparseShapes(), fakeserver.RoundedShapes()...) {
		for _, workers := range []int{8, 32} {
			t.Run(fmt.Sprintf("%s/%d", sh.Name, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					sh := sh
					sh.Config.Faults.Handshake, sh.Config.Faults.Handshakes = 100*time.Millisecond, workers
					srv := fakeserver.New(sh.Config)
					r := runShape(t, sh, srv, srv.Transport(), "http://api.test", sh.Burst+int(20*sh.Rate), workers)
					t.Log(r)
					floor, ok := floors[sh.Name]
					if !ok {
						floor = 0.95
					}
					if r.efficiency < floor {
						t.Errorf("efficiency %.3f, want at least %.2f", r.efficiency, floor)
					}
					if r.ignored != 0 {
						t.Errorf("%d sent inside a wait the client knew of", r.ignored)
					}
					w, ok := worst[sh.Name]
					if !ok {
						w = 1
					}
					if r.worst > w {
						t.Errorf("%d throttles in a window after the first, want at most %d", r.worst, w)
					}
				})
			})
		}
	}
}

// TestAlgorithmShapes runs the servers of fakeserver.AlgorithmShapes (the
// sliding window counter, stating when its quota is full again or its
// window's end, windows anchored at a key's first request, and
// fixed windows on a clock that loses a millisecond a second, each
// answering with a Retry-After alone, bare 429s, GitHub's headers or the
// IETF draft's) in virtual time, with 8 and 32 workers, with no limit
// configured and with the published one: 20 s of work at the server's
// pace, a minute for the drifting clock. The target is the others':
// efficiency 0.95, at most one throttle a window after the first, none
// sent inside an announced wait; where a shape is not there yet, the test
// holds it where it stands and logs the target. The drifting clock with
// GitHub's or the IETF's headers meets it (0.983-0.999, no throttle);
// before the offset's bounds aged (see clockOffset), GitHub's came out at
// 0.566 / 0.834 with 8 / 20 throttles in a window.
func TestAlgorithmShapes(t *testing.T) {
	type standing struct {
		floor     float64
		throttled int64
		early     bool
		windowed  bool
	}
	stands := map[string]standing{
		// 0.946-0.947 (0.993 with the limit): a whole-second wait ends past
		// the point the previous window's weight let a request through;
		// 16-22 throttles, at most 5-6 in a window after the first (a
		// counter's quota comes back request by request: after a wait,
		// what the first burst let through overruns it).
		"sliding-window-counter-retry-after": {0.92, 30, true, false},
		// 0.930-0.949 (0.907 with the limit): each whole-second wait ends
		// up to a second after the window, which then begins later; at
		// most one throttle a window after the first.
		"anchored-window-retry-after": {0.88, 30, true, true},
		// 0.986-0.998 (0.937 with the limit), at most one throttle a window
		// after the first: a minute of windows throttles once each.
		"fixed-window-drifting-retry-after": {0.91, 55, true, true},
		// 0.972-0.996, 13-26 throttles, up to 9 in a window after the
		// first with the limit: nothing names a wait, and a counter's
		// quota comes back gradually.
		"sliding-window-counter-bare-429": {0.94, 35, true, false},
		// 0.755-0.798, 12-32 throttles, up to 4 in a window after the
		// first: the pace a bare 429 teaches is a fixed window's, whose
		// boundaries do not come where an anchored window's do.
		"anchored-window-bare-429": {0.72, 40, true, false},
		// 0.939-0.952, 11-34 throttles, up to 3 in a window after the first
		// (as without drift: nothing here reads the clock).
		"fixed-window-drifting-bare-429": {0.91, 45, true, false},
		// 0.546, no throttle: "full again" of a counter spent at once is
		// two windows on (when the previous window's weight is gone), and
		// its epoch resets, whole seconds, state the same instant for the
		// whole burst: the headers describe fixed windows of 20 per 4 s,
		// which headway keeps. Telling the two apart takes a request
		// before the stated reset, which a fixed window that punishes
		// answers with a block.
		"sliding-window-counter-github": {0.52, 1, false, false},
		// 0.687-0.688, no throttle: the reset is the window's end rounded
		// up to the second, and the next window begins at the first
		// request after it, 0.02 s past a whole second: each window of 2 s
		// is waited for 3. Only a client that timed its windows' first
		// requests to just before the server's second turns could do
		// better without sending inside a stated wait.
		"anchored-window-github": {0.66, 1, false, false},
		// 0.760-0.813, no throttle: as GitHub's (a counter read as
		// windows), with resets that move on within a burst, which stated
		// to the second do not tell a counter from a window turning.
		"sliding-window-counter-ietf": {0.73, 1, false, false},
		// The counter states its present window's end as its reset
		// (Upstash's), which headway first takes for a fixed window's
		// turn; at it the previous window's count still weighs in full,
		// and nearly every worker is throttled (7-19 in that window). A
		// throttle of the present window before half its quota left since
		// it turned shows its resets restart a count and bring nothing
		// back (see serverModel.turnedEmpty): the key paces it as a bucket
		// from then on, at its stated policy. With the IETF's headers:
		// 0.627-0.663 and 18-93 throttles -> 0.844-0.849 and 7-19, all in
		// that one window. GitHub's state no policy and a bucket of no
		// known rate refills at each reset: 0.546, 70-164 throttles, 7-19
		// a window (seeding the rate with the windows' quota a period cut
		// the throttles to 14-69 but cost 8 workers 0.07).
		"sliding-window-counter-window-end-github": {0.52, 200, true, false},
		"sliding-window-counter-window-end-ietf":   {0.80, 30, true, false},
		// 0.945-0.984: t in whole seconds of a window that does not begin
		// on one.
		"anchored-window-ietf": {0.92, 1, false, false},
	}
	var cases []shapeCase
	for _, sh := range fakeserver.AlgorithmShapes() {
		c := shapeCase{Shape: sh, n: sh.Burst + int(20*sh.Rate), minEff: 0.95, maxThrottled: 1}
		if sh.Config.ClockDrift != 0 {
			c.n = sh.Burst + int(60*sh.Rate)
		}
		if st, ok := stands[sh.Name]; ok {
			c.floor, c.maxThrottled, c.earlyOK, c.windowed = st.floor, st.throttled, st.early, st.windowed
		}
		cases = append(cases, c)
	}
	runShapeCases(t, cases)
}
