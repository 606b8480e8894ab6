package headway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
)

// modelRun sends n GETs from workers goroutines through New(srv) with
// each request's context ending at deadline (from the start); a request
// that is not answered 200 is sent again (after a second, on an error).
// It returns the 200s, the errors and the time the last 200 took.
func modelRun(t *testing.T, cfg fakeserver.Config, n, workers int, deadline time.Duration) (done int64, errs []error, took time.Duration) {
	srv := fakeserver.New(cfg)
	tr := New(srv.Transport())
	defer tr.CloseIdleConnections()
	return modelRunTr(t, tr, n, workers, deadline)
}

// modelRunTr is modelRun through tr.
func modelRunTr(t *testing.T, tr *Transport, n, workers int, deadline time.Duration) (done int64, errs []error, took time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	var next, ok atomic.Int64
	var mu sync.Mutex
	var last time.Time
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						if ctx.Err() == nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							time.Sleep(time.Second)
						}
						continue
					}
					drain(resp)
					if resp.StatusCode == http.StatusOK {
						ok.Add(1)
						mu.Lock()
						last = time.Now()
						mu.Unlock()
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return ok.Load(), errs, last.Sub(start)
}

// A bare 429 (a proxy's, or a block that says nothing) after answers that
// stated what remains without a reset left the model below empty with
// neither rate nor reset: serverModel.earliest said "a second on" for
// good, and the key's timer was re-armed every second without a request
// leaving (3 of 5 done in 10 minutes). Such a model now sends one request
// at a time, a while apart, as it does when it knows nothing of the refill.
//
// With 8 requests, the last two then waited 37 minutes: the one request
// short of the measured rate in the 5 s between two of the window's
// answers cut the rate from 0.21/s to 0.0009/s at once (see remeasure).
func TestABare429WithNeitherRateNorResetDoesNotHoldTheKeyForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 3, Window: 10 * time.Second,
			Dialect: fakeserver.AzureOpenAI{}, Faults: fakeserver.Faults{Latency: 20 * time.Millisecond},
			Penalty: fakeserver.Penalty{Block: 30 * time.Second, BlockStates: fakeserver.StateNothing}}
		for _, n := range []int{5, 8} {
			done, errs, took := modelRun(t, cfg, n, 2, 10*time.Minute)
			t.Logf("%d of %d in %v, %d errors", done, n, took, len(errs))
			for i, e := range errs {
				if i < 3 || i == len(errs)-1 {
					t.Log(e)
				}
			}
			if done != int64(n) || len(errs) != 0 {
				t.Errorf("%d of %d done in 10 minutes, %d errors (least: the block, 30 s, and a window)", done, n, len(errs))
			}
			// Least: 40 s (3 before the block, which ends at 30 s, then
			// windows of 3). The block is found by probes a doubling
			// while apart, and the rate from what comes back.
			if took > 2*time.Minute {
				t.Errorf("%d requests took %v; least 40 s", n, took)
			}
		}
	})
}

// A queued request whose place in the queue was beyond a window's quota
// got a known wait of math.MaxInt64 from serverModel.earliest, and failed
// at once with a WaitError of 2562047h whenever its context had a deadline
// (an http.Client.Timeout), though its turn came within seconds (7 of 15
// requests of 8 workers, 1/s burst 1). The wait is now the windows its
// place needs, a bound from below.
func TestARequestDeepInTheQueueOfAWindowIsNotToldAnEndlessWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fakeserver.Config{Limit: 1, Burst: 1, Dialect: fakeserver.XRateLimit{},
			Faults: fakeserver.Faults{Latency: 20 * time.Millisecond}}
		done, errs, took := modelRun(t, cfg, 15, 8, time.Hour)
		t.Logf("%d of 15 in %v", done, took)
		for _, err := range errs {
			var we *WaitError
			if errors.As(err, &we) {
				t.Errorf("%v (wait %v): the request's turn comes within 15 s", err, we.Wait)
				break
			}
		}
		if len(errs) > 0 {
			t.Errorf("%d errors", len(errs))
		}
	})
}

// Atlassian states its reset to the minute, rounded up: of a bucket of
// 20/s burst 10 it says "reset in a minute" while the quota comes back in
// half a second. The reset stays put while the quota drains, and the
// bounds it puts on the rate contradict each other: the model took the
// bucket for a fixed window of 10 a minute, and 100 requests took some 9
// minutes (least: 4.5 s). A request counted after the least answer and
// told more left, the reset no later, proves the resets say nothing of
// the refill.
func TestAResetRoundedUpToTheMinuteIsNotTakenForAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fakeserver.Config{Limit: 20, Burst: 10, Dialect: fakeserver.Atlassian{},
			Faults: fakeserver.Faults{Latency: 20 * time.Millisecond}}
		done, errs, took := modelRun(t, cfg, 100, 8, time.Hour)
		t.Logf("%d of 100 in %v, %d errors", done, took, len(errs))
		if done != 100 || len(errs) != 0 || took > 6*time.Second {
			t.Errorf("%d of 100 in %v, %d errors; want all within 6 s (least 4.5 s)", done, took, len(errs))
		}
	})
}

// A window that states its quota as a policy (IETF, 5 per 2 s) was read
// as a bucket refilling 2.5/s: after r=0;t=2 the model refilled by its
// rate, and sent again 0.8 s later, well before the stated reset. Against
// a sliding window that blocks a key for 30 s on a violation (with bare
// 429s), every cycle ended in a block: 40 requests took 6 minutes. The
// first such throttle now proves that nothing comes back before the
// stated resets.
//
// GitHub's resets are epochs in whole seconds, and its answers name a
// resource (a bucket of its own model): the same held there. Over its
// sliding window, whose quota comes back before the stated resets, one
// run in two or three took 3m38s (4 blocks): after quota came back early,
// a throttle of a request trickled in was the model's error, and the
// next cycle met it again. A block after such a throttle now makes the
// resets windows too (see serverModel.judgeTrickle). The runs differ by
// the order in which goroutines run: each case runs a few times.
func TestAThrottleBeforeAStatedResetEndsTheTrickle(t *testing.T) {
	for _, c := range []struct {
		alg fakeserver.Algorithm
		d   fakeserver.Dialect
	}{
		{fakeserver.FixedWindow, fakeserver.IETF{}},
		{fakeserver.SlidingWindow, fakeserver.IETF{}},
		{fakeserver.FixedWindow, fakeserver.GitHub{}},
		{fakeserver.SlidingWindow, fakeserver.GitHub{}},
	} {
		alg := c.alg
		for range 4 {
			synctest.Test(t, func(t *testing.T) {
				cfg := fakeserver.Config{Algorithm: alg, Limit: 5, Window: 2 * time.Second, Dialect: c.d,
					Penalty: fakeserver.Penalty{Block: 30 * time.Second, BlockStates: fakeserver.StateNothing},
					Faults:  fakeserver.Faults{Latency: 20 * time.Millisecond}}
				srv := fakeserver.New(cfg)
				tr := New(srv.Transport())
				defer tr.CloseIdleConnections()
				done, errs, took := modelRunTr(t, tr, 40, 8, 30*time.Minute)
				st := srv.Stats()
				t.Logf("%v %T: %d of 40 in %v, %d errors, %d rejected, %d blocked", alg, c.d, done, took, len(errs), st.Rejected, st.Blocked)
				assert.EqualValues(t, 40, done)
				assert.Empty(t, errs)
				// Least: 14 s without a violation; one block costs 30 s and
				// the probes that find its end.
				assert.LessOrEqual(t, st.Rejected, int64(1), "%v: one violation at most", alg)
				assert.Less(t, took, 90*time.Second, "%v", alg)
			})
		}
	}
}

// A bucket of 50/s burst 5 whose answers state resets in whole seconds
// (X-RateLimit-Reset: 1 at every answer): the first bounds the resets put
// on the rate say 2/s, and the model climbs to the rate by what more is
// left than it predicted. Measured only over spans that refill 4 requests
// at the rate so far (rateQuanta, which keeps a throttle's rounding from
// cutting the rate of a bucket of one), that climb took 2 s spans at
// first, and 400 requests took 11.6 s (least 7.9 s).
func TestAClimbToTheRateIsNotHeldToLongSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fakeserver.Config{Limit: 50, Burst: 5, Window: time.Second, Dialect: fakeserver.XRateLimit{},
			Faults: fakeserver.Faults{Latency: 20 * time.Millisecond}}
		done, errs, took := modelRun(t, cfg, 400, 16, 10*time.Minute)
		t.Logf("%d of 400 in %v, %d errors", done, took, len(errs))
		assert.EqualValues(t, 400, done)
		assert.Empty(t, errs)
		assert.Less(t, took, 10500*time.Millisecond, "least 7.9 s")
	})
}
