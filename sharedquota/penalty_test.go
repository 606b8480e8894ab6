package sharedquota

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/ratelimitheader"
)

// timeline records when each answer of a Server left, and its status.
type timeline struct {
	mu  sync.Mutex
	at  []time.Time
	st  []int
	srv *fakeserver.Server
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }

func (tl *timeline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	tl.srv.ServeHTTP(sw, r)
	tl.mu.Lock()
	tl.at, tl.st = append(tl.at, time.Now()), append(tl.st, sw.code)
	tl.mu.Unlock()
}

// show returns the answers by 100 ms from start, a second a line: "+"
// admitted, "x" refused, "." none.
func (tl *timeline) show(start time.Time) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	bins := map[int]string{}
	most := 0
	for i, at := range tl.at {
		d := max(int(at.Sub(start)/(100*time.Millisecond)), 0)
		c := "+"
		if tl.st[i] != http.StatusOK {
			c = "x"
		}
		bins[d] += c
		most = max(most, d)
	}
	var b strings.Builder
	for d := 0; d <= most; d++ {
		if d%10 == 0 {
			fmt.Fprintf(&b, "\n%4ds", d/10)
		}
		if bins[d] == "" {
			b.WriteString(" .")
		} else {
			b.WriteString(" " + bins[d])
		}
	}
	return b.String()
}

// penaltyRow is one server that punishes, and how a fleet meets it.
type penaltyRow struct {
	alg    fakeserver.Algorithm
	rate   int // a second; the bucket's burst is the same
	dial   fakeserver.Dialect
	states fakeserver.BlockStatement
	extend bool
	ban    int
}

func (r penaltyRow) config() fakeserver.Config {
	return fakeserver.Config{
		Algorithm: r.alg, Limit: r.rate, Window: time.Second, Burst: r.rate, Dialect: r.dial,
		Penalty: fakeserver.Penalty{Block: 10 * time.Second, Extend: r.extend, BlockStates: r.states, BanAfter: r.ban},
		Faults:  fakeserver.Faults{Latency: 5 * time.Millisecond},
	}
}

// penaltyResult is what a fleet (or one process) met.
type penaltyFleet struct {
	st          fakeserver.Stats
	ok          int64
	took, least time.Duration
	line        string
}

// runPenalty sends n requests to a server of r from procs processes of
// workers goroutines each (alone: one process, sharing nothing), no
// limits configured, retrying through blocks.
func runPenalty(tb testing.TB, r penaltyRow, n, procs, workers int, alone bool) penaltyFleet {
	tb.Helper()
	srv := fakeserver.New(r.config())
	run := runUnlimited(tb, srv, n, procs, workers, alone, 3*time.Minute)
	var out penaltyFleet
	out.ok, out.took, out.st = run.ok, run.took, srv.Stats()
	if r.alg == fakeserver.FixedWindow {
		out.least = time.Duration(n/r.rate-1) * time.Second
	} else {
		out.least = time.Duration(float64(n-r.rate) / float64(r.rate) * float64(time.Second))
	}
	if os.Getenv("FLEET_TIMELINE") != "" {
		out.line = run.tl.show(run.start)
	}
	return out
}

func (p penaltyFleet) report(b *testing.B) {
	b.ReportMetric(float64(p.st.Rejected), "blocks")
	b.ReportMetric(float64(p.st.Blocked), "into")
	b.ReportMetric(float64(p.st.Bans), "bans")
	b.ReportMetric(float64(p.ok), "answered")
	b.ReportMetric(p.least.Seconds()/p.took.Seconds(), "efficiency")
	if dir := os.Getenv("FLEET_TIMELINE"); dir != "" {
		name := strings.NewReplacer("/", "_", "=", "").Replace(b.Name())
		_ = os.WriteFile(dir+"/"+name+".txt", []byte(p.line+"\n"), 0o644)
	}
}

// BenchmarkFleetPenaltySweep runs 3 processes of 4 workers (and one of 12
// alone, for comparison), no limits configured, sharing, retrying, 300
// requests against servers that block a violation for 10 s: a bucket of
// 10/s burst 10 and fixed windows of 20/s, answered bare or in
// Retry-After (the block's end, or the window's wait), each request in a
// block restarting it or not; a ban after 5 violations where the name
// says so. It reports blocks begun, requests sent into blocks, bans and
// the efficiency (least time over time taken). Run with
//
//	go test -run '^$' -bench FleetPenaltySweep -benchtime 1x .
//
// FLEET_TIMELINE=dir writes each run's answers by 100 ms to a file in dir.
func BenchmarkFleetPenaltySweep(b *testing.B) {
	type dial struct {
		name   string
		d      fakeserver.Dialect
		states fakeserver.BlockStatement
	}
	for _, alg := range []struct {
		name string
		alg  fakeserver.Algorithm
		rate int
	}{{"tb10", fakeserver.TokenBucket, 10}, {"fw20", fakeserver.FixedWindow, 20}} {
		for _, d := range []dial{
			{"bare", fakeserver.Bare{}, fakeserver.StateNothing},
			{"ra-end", fakeserver.RetryAfterSeconds{}, fakeserver.StateBlockEnd},
			{"ra-window", fakeserver.RetryAfterSeconds{}, fakeserver.StateWindow},
		} {
			for _, ext := range []bool{true, false} {
				for _, ban := range []int{0, 5} {
					for _, alone := range []bool{false, true} {
						name := fmt.Sprintf("%s/%s/extend=%v/ban=%d/alone=%v", alg.name, d.name, ext, ban, alone)
						b.Run(name, func(b *testing.B) {
							r := penaltyRow{alg: alg.alg, rate: alg.rate, dial: d.d, states: d.states, extend: ext, ban: ban}
							for range b.N {
								procs, workers := 3, 4
								if alone {
									procs, workers = 1, 12
								}
								runPenalty(b, r, 300, procs, workers, alone).report(b)
							}
						})
					}
				}
			}
		}
	}
}

// TestAFleetMeetsABlockOnce: 3 processes of 4 workers, no limits
// configured, sharing, against a bucket of 10/s burst 10 that blocks a
// violation for 10 s (each request in the block restarting it), answered
// bare or with the block's end in Retry-After, meet the block their first
// burst begins and few others, and send few requests into blocks after
// that first burst. The fleet resumes after a block as a process does, at
// what the burst let through a second, from the block's end, climbing
// back slowly; the requests it booked reserve again after each backoff.
// (Before: a fleet that doubled its pace through the block sent what it
// had booked at once when it ended, or measured its next cut over the
// block and crawled; what it had booked at a slow pace went into the
// block one by one, each restarting it: 3-4 blocks and 19-81 requests
// into them in 300 requests.) It counts, which a loaded machine changes
// little: the first burst's requests into the block, sent before any
// process heard of its throttle, are most of what it allows.
func TestAFleetMeetsABlockOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs of 3 processes against a block of 10 s")
	}
	for _, c := range []struct {
		name   string
		dial   fakeserver.Dialect
		states fakeserver.BlockStatement
	}{
		{"bare", fakeserver.Bare{}, fakeserver.StateNothing},
		{"retry-after", fakeserver.RetryAfterSeconds{}, fakeserver.StateBlockEnd},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := penaltyRow{alg: fakeserver.TokenBucket, rate: 10, dial: c.dial, states: c.states, extend: true}
			const n = 150
			p := runPenalty(t, r, n, 3, 4, false)
			t.Logf("%+v, took %v (least %v)", p.st, p.took.Round(time.Millisecond), p.least)
			if p.ok != n {
				t.Errorf("%d of %d answered", p.ok, n)
			}
			if p.st.Rejected > 2 {
				t.Errorf("%d blocks begun, want 2 at most", p.st.Rejected)
			}
			if p.st.Blocked > 24 {
				t.Errorf("%d requests sent into blocks, want 24 at most", p.st.Blocked)
			}
		})
	}
}

// TestTheFirstBurstCountsWhatLeft: the pace a fleet resumes at after the
// block its first burst met is what that burst let through a second: the
// requests that left at once, less those throttled, not the requests
// reserved after the pause the first throttle set (the root shares the
// pause before the throttle): they wait for the block's end, and are
// no part of the burst. Here 16 leave at once, 6 of them are throttled,
// and 4 more are booked after the pause of 10 s: the fleet resumes at
// 10/s at most (before: 14/s, above the server's rate, and a second
// block).
func TestTheFirstBurstCountsWhatLeft(t *testing.T) {
	c := newClient(t, redisAddr(t))
	ctx := context.Background()
	q := newQuota(t, c, WithHeartbeat(time.Hour))
	for i := range 16 {
		if d, err := q.Reserve(ctx, "k", nil, 1, forever); err != nil || d != 0 {
			t.Fatalf("reservation %d of the burst: %v, %v; want to leave at once", i, d, err)
		}
	}
	if err := q.Pause(ctx, "k", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if d, err := q.Reserve(ctx, "k", nil, 1, forever); err != nil || d < 9*time.Second {
			t.Fatalf("reservation %d after the pause: %v, %v; want one after it", i, d, err)
		}
	}
	throttle := ratelimitheader.Signal{Throttled: true, HasWait: true, Wait: 10 * time.Second, RetryAfter: true}
	for range 6 {
		if err := q.Learn(ctx, "k", throttle); err != nil {
			t.Fatal(err)
		}
	}
	quota, _ := q.KeyNames("k")
	ar, err := c.HGet(ctx, quota, "ar").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if ar > 10_000 {
		t.Errorf("the fleet resumes at %.1f/s after the block; the burst let 10 through", float64(ar)/1000)
	}
}

// TestAWindowAfterAll: a fleet's first throttle that names a long wait in
// whole seconds is taken for a block's (the climb back takes penClimb
// times the wait); the first throttle sent after it tells a window from a
// block, as a process's does (the root's aimd.windowAfterAll): naming a
// wait shorter by half a second or more, it is a window's boundary, and
// the fleet forgets the block (the climb back takes aimdK) and waits as
// long as the first wait; naming one as long, a block's, which stays.
// (Before: the fleet took every such first wait for a block's, and
// climbed back over 40 s after a window of 10 s.)
func TestAWindowAfterAll(t *testing.T) {
	c := newClient(t, redisAddr(t))
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		second time.Duration
		window bool
	}{{"window", 7 * time.Second, true}, {"block", 10 * time.Second, false}} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQuota(t, c, WithHeartbeat(time.Hour), WithPrefix(testPrefix(t)))
			for range 10 {
				if _, err := q.Reserve(ctx, "k", nil, 1, forever); err != nil {
					t.Fatal(err)
				}
			}
			named := func(w time.Duration) ratelimitheader.Signal {
				return ratelimitheader.Signal{Throttled: true, HasWait: true, Wait: w, RetryAfter: true}
			}
			if err := q.Learn(ctx, "k", named(10*time.Second)); err != nil {
				t.Fatal(err)
			}
			quota, _ := q.KeyNames("k")
			if ak, err := c.HGet(ctx, quota, "ak").Int64(); err != nil || ak != int64(aimdPenClimb*10*time.Second/time.Microsecond) {
				t.Fatalf("after the first throttle, the climb takes %dµs (%v), want penClimb times the wait", ak, err)
			}
			// A cycle sent after the wait (here, without the pause the
			// root would share: at the fleet's pace), the last of it
			// throttled.
			var last time.Duration
			for range 5 {
				d, err := q.Reserve(ctx, "k", nil, 1, forever)
				if err != nil || d > 2*time.Second {
					t.Fatalf("Reserve after the cut: %v, %v", d, err)
				}
				last = max(last, d)
			}
			time.Sleep(last + 5*time.Millisecond)
			if err := q.Learn(ctx, "k", named(tc.second)); err != nil {
				t.Fatal(err)
			}
			ak, err := c.HGet(ctx, quota, "ak").Int64()
			if err != nil {
				t.Fatal(err)
			}
			p, err := q.Reserve(ctx, "k", nil, 1, forever)
			if err != nil {
				t.Fatal(err)
			}
			if tc.window {
				if ak > int64(aimdK/time.Microsecond) {
					t.Errorf("a window after all: the climb takes %v, want aimdK", time.Duration(ak)*time.Microsecond)
				}
				if p < 9*time.Second {
					t.Errorf("a window after all: the next request waits %v, want the first wait, 10s", p)
				}
			} else if ak != int64(aimdPenClimb*10*time.Second/time.Microsecond) {
				t.Errorf("a block: the climb takes %v, want penClimb times the first wait", time.Duration(ak)*time.Microsecond)
			}
		})
	}
}

// unlimitedRun is what runUnlimited saw: the requests answered, the time
// from the start to the last, and the server's timeline from start.
type unlimitedRun struct {
	ok      int64
	refused int64 // answered with a refusal after the last attempt
	errs    int64
	took    time.Duration
	start   time.Time
	tl      *timeline
}

// runUnlimited sends n requests to srv from procs processes of workers
// goroutines each (alone: sharing nothing), no limits configured, each
// request retried until it goes through, for dur at most.
func runUnlimited(tb testing.TB, srv *fakeserver.Server, n, procs, workers int, alone bool, dur time.Duration) unlimitedRun {
	tb.Helper()
	addr := redisAddr(tb)
	tl := &timeline{srv: srv}
	ts := httptest.NewServer(tl)
	defer ts.Close()
	out := unlimitedRun{start: time.Now().Add(2 * time.Second), tl: tl}
	res := runFleet(tb, procs, workerConfig{
		Redis: addr, URL: ts.URL, Prefix: testPrefix(tb),
		Goroutines: workers, Requests: n / procs, NoLimit: true, Alone: alone, Attempts: 30,
		Start: out.start, Duration: dur, Timeout: 2 * time.Second,
	})
	var done time.Time
	for _, w := range res {
		out.ok += w.OK
		out.refused += w.TooMany
		out.errs += w.Errors
		if w.Done.After(done) {
			done = w.Done
		}
	}
	out.took = done.Sub(out.start)
	return out
}
