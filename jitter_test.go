package headway_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// TestSlowAnswersStillSpendTheWindows runs the fixed windows of issue 12
// that say nothing but a Retry-After date (20 per 2 s, on a clock 30 s
// ahead) with answers that take 150 ms, plus jitter (uniform, up to the
// level of the row), in virtual time, 8 and 32 workers. One request at a
// time, an answer apart, is then slower than the window's quota over its
// length: a key that probed that way after its first cycles never overran
// a window again, never learned it, and sent under the server's rate for
// good (0.54-0.67). The probes now go no slower than what the cycles let
// through, once they have gone on longer than a cycle without a throttle.
//
// Target 0.88: when the probes never overrun a window, the key paces at
// the rate the cycles sustained, the server's own (measured 0.897-0.906
// at every jitter), and learning in the first two windows costs the rest;
// at most one throttle a window after the first, none sent inside a wait
// the client knew of.
func TestSlowAnswersStillSpendTheWindows(t *testing.T) {
	rows := []struct {
		shape  string
		jitter time.Duration
		seeds  []uint64
		minEff float64
	}{
		{"fixed-window-date-skewed", 20, []uint64{1}, 0.88},
		{"fixed-window-date-skewed", 50, []uint64{2}, 0.88},
		{"fixed-window-date-skewed", 100, []uint64{3}, 0.88},
	}
	shapes := map[string]fakeserver.Shape{}
	for _, sh := range fakeserver.SparseShapes() {
		shapes[sh.Name] = sh
	}
	for _, row := range rows {
		if row.shape != "fixed-window-date-skewed" {
			continue
		}
		for _, seed := range row.seeds {
			for _, workers := range []int{8, 32} {
				sh := shapes[row.shape]
				sh.Config.Faults = fakeserver.Faults{Latency: 150 * time.Millisecond, Jitter: row.jitter * time.Millisecond, Seed: seed}
				t.Run(fmt.Sprintf("%s/jitter-%dms/seed-%d/%d", row.shape, row.jitter, seed, workers), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						srv := fakeserver.New(sh.Config)
						r := runShape(t, sh, srv, srv.Transport(), "http://api.test", sh.Burst+int(20*sh.Rate), workers)
						t.Log(r)
						if r.efficiency < row.minEff {
							t.Errorf("efficiency %.3f, want at least %.2f", r.efficiency, row.minEff)
						}
						if r.worst > 1 {
							t.Errorf("%d throttles in a window after the first, want at most 1", r.worst)
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

// TestJitteredAnswersNameOneWindow runs the Discord routes of issue 12
// (fixed windows of 5 per 1 s, their ends stated to the millisecond as a
// Reset-After) with answers that take 150 ms plus up to 50 or 100 ms of
// jitter, in virtual time, 8 and 32 workers. Answers of one window that
// came back at different speeds name its end at instants up to the jitter
// apart; read as new windows, they measured periods of a few ms, and the
// model let every request in flight through after each window's quota:
// 10-68 throttles a run, up to 17 in one window (-race, 40 runs). Read at
// their arrivals to within 10 ms, they made the routes look like slow
// buckets for the first 5-8 s (efficiency 0.887-0.935 in a few runs),
// and 0-10 throttles a run. Each answer's instant now lies between its
// request's departure and its arrival, plus the reset (serverModel.names,
// stays): 0 throttles, efficiency 0.979-0.983 (-race, 80 runs). The test
// holds the targets: efficiency 0.95, at most one throttle a window after
// the first, at most 8 throttles in the 8 runs, none sent inside a wait
// the client knew of.
//
// A known tail: in some goroutine orders one run takes its one or two
// throttles in one window, of one route. Two are allowed in one window of
// one run of the eight, never more. With 8 workers, it was an answer that
// came back after a later departure's, taken whole: it lifted the model of
// a bucket shared by two routes by three where one was left (see
// serverModel.observe); since, 3 of 600 runs of the test (5 of 600, and 6
// of 300, before), all with 32 workers, whose cause is not understood yet.
func TestJitteredAnswersNameOneWindow(t *testing.T) {
	var total int64
	twice := 0 // runs with two throttles in one window
	defer func() {
		if total > 8 {
			t.Errorf("%d throttled in the 8 runs, want at most 8", total)
		}
		if twice > 1 {
			t.Errorf("%d runs took two throttles in one window after the first, want at most 1", twice)
		}
	}()
	var sh fakeserver.Shape
	for _, s := range fakeserver.SparseShapes() {
		if s.Name == "discord-routes" {
			sh = s
		}
	}
	for _, jitter := range []time.Duration{50, 100} {
		for _, seed := range []uint64{1, 2} {
			for _, workers := range []int{8, 32} {
				sh := sh
				sh.Config.Faults = fakeserver.Faults{Latency: 150 * time.Millisecond, Jitter: jitter * time.Millisecond, Seed: seed}
				t.Run(fmt.Sprintf("jitter-%dms/seed-%d/%d", jitter, seed, workers), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						srv := fakeserver.New(sh.Config)
						r := runShape(t, sh, srv, srv.Transport(), "http://api.test", sh.Burst+int(20*sh.Rate), workers)
						t.Log(r)
						if r.efficiency < 0.95 {
							t.Errorf("efficiency %.3f, want at least 0.95", r.efficiency)
						}
						total += r.throttled
						switch {
						case r.worst == 2:
							twice++
							t.Logf("the known tail: 2 throttles in one window after the first")
						case r.worst > 1:
							t.Errorf("%d throttles in one window after the first, want at most 1 (2 in one run of the 8)", r.worst)
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
