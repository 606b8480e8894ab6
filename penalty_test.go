package headway

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// penaltyResult is what one run against a server that punishes did.
type penaltyResult struct {
	st          fakeserver.Stats
	failed      int64 // requests handed back without a 200
	errs        []error
	took, least time.Duration
	lastSecond  int // admitted in the last second of the run
}

func (r penaltyResult) String() string {
	return fmt.Sprintf("into the block %d, banned %d (bans %d), throttled %d, failed %d, took %v (least %v), last second %d",
		r.st.Blocked, r.st.Banned, r.st.Bans, r.st.Rejected, r.failed, r.took.Round(time.Millisecond), r.least, r.lastSecond)
}

// penaltyServer is a limit of 10 a second with a burst of 10, 5 ms away,
// that punishes as pen says.
func penaltyServer(pen fakeserver.Penalty) *fakeserver.Server {
	return fakeserver.New(fakeserver.Config{Limit: 10, Burst: 10, Penalty: pen,
		Faults: fakeserver.Faults{Latency: 5 * time.Millisecond}})
}

// penaltyRun sends n GETs from workers goroutines through a Transport made
// with opts to srv, in memory; a request handed back without a 200 counts
// as failed and is sent again a second later (a 403 is given up), so that
// all n are done. When outside is positive, another client of the same key
// sends a burst straight to the server at that time: the key is
// throttled while it believes itself within the limit.
func penaltyRun(t *testing.T, srv *fakeserver.Server, n, workers int, outside time.Duration, opts ...Option) penaltyResult {
	tr := New(srv.Transport(), opts...)
	defer tr.CloseIdleConnections()
	var next, failed atomic.Int64
	var mu sync.Mutex
	var oks []time.Time
	var errs []error
	start := time.Now()
	var wg sync.WaitGroup
	if outside > 0 {
		wg.Go(func() {
			time.Sleep(outside)
			outsideBurst(t, srv)
		})
	}
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				for {
					resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items"))
					if err == nil {
						drain(resp)
					}
					if err == nil && resp.StatusCode == http.StatusOK {
						mu.Lock()
						oks = append(oks, time.Now())
						mu.Unlock()
						break
					}
					failed.Add(1)
					mu.Lock()
					if err == nil {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
					errs = append(errs, err)
					mu.Unlock()
					if resp != nil && resp.StatusCode == http.StatusForbidden {
						break // refused: the caller gives it up
					}
					time.Sleep(time.Second) // as a caller would: not a busy loop
				}
			}
		})
	}
	wg.Wait()
	r := penaltyResult{st: srv.Stats(), failed: failed.Load(), errs: errs, took: time.Since(start)}
	// The least time: n at 10 a second after the burst of 10.
	r.least = time.Duration(n-10) * 100 * time.Millisecond
	if len(oks) > 0 {
		end := oks[len(oks)-1]
		for _, at := range oks {
			if end.Sub(at) < time.Second {
				r.lastSecond++
			}
		}
	}
	return r
}

var penaltyRetry = WithRetry(RetryOptions{MaxAttempts: 30, MaxElapsed: -1})

// A block of 60 s restarted by every request in it, as each statement says
// it: a key that knows its limit is throttled once by another client's
// burst, and sends a handful of requests into the block (one at a time,
// each after twice the pause before), loses none, and goes back to its
// full pace after it.
func TestABlockRestartedByEveryRequestSeesAHandfulOfThem(t *testing.T) {
	for _, states := range []fakeserver.BlockStatement{fakeserver.StateBlockEnd, fakeserver.StateWindow, fakeserver.StateNothing} {
		t.Run(states.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := penaltyServer(fakeserver.Penalty{Block: time.Minute, BlockStates: states, Extend: true})
				r := penaltyRun(t, srv, 300, 8, 5*time.Second, penaltyRetry, WithLimit(PerSecond(10).WithBurst(10)))
				r.least += time.Minute
				t.Logf("%v", r)
				assert.Zero(t, r.failed, "%v", r.errs)
				// One request at a time, the pause doubling from 200ms (or
				// the stated 1 s) until it outlasts the block: log2(60/0.2)
				// and one, at most.
				assert.LessOrEqual(t, r.st.Blocked, int64(10), "requests sent into the block")
				assert.GreaterOrEqual(t, r.lastSecond, 9, "back at its full pace")
				// The last try throttled came less than a block after the
				// one before, so the pause after it is less than two
				// blocks, and the tries before it took less than that: the
				// key is through within four blocks of the throttle.
				assert.Less(t, r.took, r.least+3*time.Minute+10*time.Second)
			})
		})
	}
}

// The same block, for a key that knows nothing of its limit and learns it:
// the block comes from its own bursts.
func TestABlockRestartedByEveryRequestWhileLearning(t *testing.T) {
	for _, states := range []fakeserver.BlockStatement{fakeserver.StateBlockEnd, fakeserver.StateWindow, fakeserver.StateNothing} {
		t.Run(states.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := penaltyServer(fakeserver.Penalty{Block: time.Minute, BlockStates: states, Extend: true})
				r := penaltyRun(t, srv, 300, 8, 0, penaltyRetry)
				t.Logf("%v", r)
				assert.Zero(t, r.failed, "%v", r.errs)
				assert.LessOrEqual(t, r.st.Rejected, int64(4), "throttles that began a block")
				// Those in flight when the first came (8 workers), and
				// log2(60/0.2)+2 tries at most for each block.
				assert.LessOrEqual(t, r.st.Blocked, 8+11*r.st.Rejected, "requests sent into the blocks")
				assert.Less(t, r.took, 10*time.Minute)
			})
		})
	}
}

// A stated block longer than the cap on server waits: the key does not
// probe it every cap interval; its requests fail at once, unsent, with a
// *WaitError that names the wait, until what is left fits the cap.
func TestABlockLongerThanTheCapFailsRequestsUnsent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := penaltyServer(fakeserver.Penalty{Block: 5 * time.Minute, Extend: true})
		tr := New(srv.Transport(), WithLimit(PerSecond(10).WithBurst(10)), WithMaxServerWait(time.Minute))
		outsideBurst(t, srv) // another client spends the quota and more
		start := time.Now()
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items"))
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 429, resp.StatusCode, "a wait over the cap goes back at once")
		var sent int64
		for time.Since(start) < 10*time.Minute {
			before := srv.Stats().Total
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items"))
			sent += srv.Stats().Total - before
			if err == nil {
				drain(resp)
				if resp.StatusCode == 200 {
					break
				}
				continue
			}
			var we *WaitError
			require.ErrorAs(t, err, &we)
			assert.True(t, we.Stated)
			time.Sleep(10 * time.Second)
		}
		st := srv.Stats()
		t.Logf("sent %d after the first, through at %v, %+v", sent, time.Since(start), st)
		assert.LessOrEqual(t, st.Blocked, int64(2), "into the block: the first answer's and at most one try")
		assert.Less(t, time.Since(start), 5*time.Minute+20*time.Second)
	})
}

// A request whose deadline comes before the key's next try fails at once
// with a *WaitError, unsent.
func TestARequestThatCannotWaitForTheNextTryFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := penaltyServer(fakeserver.Penalty{Block: time.Minute, BlockStates: fakeserver.StateWindow, Extend: true})
		tr := New(srv.Transport(), WithLimit(PerSecond(10).WithBurst(10)), WithRetry(RetryOptions{MaxAttempts: 1}))
		outsideBurst(t, srv)
		for range 2 { // two throttles in a row: the next try is 2 s away
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items"))
			require.NoError(t, err)
			drain(resp)
			assert.Equal(t, 429, resp.StatusCode)
		}
		before := srv.Stats().Total
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := tr.RoundTrip(mustReq(t, "http://api.test/items").WithContext(ctx))
		var we *WaitError
		require.ErrorAs(t, err, &we)
		assert.Zero(t, time.Since(start), "at once")
		assert.Greater(t, we.Wait, we.Allowed)
		assert.Equal(t, before, srv.Stats().Total, "unsent")
	})
}

// A ban of 5 minutes after 3 violations within a minute, answered 403 with
// Retry-After and a message (GitHub's secondary limit's shape): a key with
// the published limit never meets it; one that learns meets it once at
// most, and loses no request to it.
func TestABanAfterRepeatedViolations(t *testing.T) {
	ban := fakeserver.Penalty{BanAfter: 3, BanRetryAfter: true,
		BanBody: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`}
	t.Run("published", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := penaltyRun(t, penaltyServer(ban), 300, 8, 0, penaltyRetry, WithLimit(PerSecond(10).WithBurst(10)))
			t.Logf("%v", r)
			assert.Zero(t, r.failed)
			assert.Zero(t, r.st.Rejected+r.st.Banned)
			assert.Less(t, r.took, r.least+time.Second)
		})
	})
	t.Run("learning", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := penaltyRun(t, penaltyServer(ban), 300, 8, 0, penaltyRetry)
			t.Logf("%v", r)
			assert.Zero(t, r.failed, "%v", r.errs)
			assert.LessOrEqual(t, r.st.Bans, int64(1))
			assert.LessOrEqual(t, r.st.Banned, int64(8), "into the ban: those in flight when it began")
		})
	})
}

// A ban answered with a bare 403 (no header, no body) is no rate limit a
// client can tell: each request is sent once and handed back.
func TestABare403IsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := penaltyServer(fakeserver.Penalty{BanAfter: 1})
		for range 11 {
			drain(mustRoundTrip(t, srv.Transport(), "http://api.test/other"))
		}
		require.EqualValues(t, 1, srv.Stats().Bans)
		tr := New(srv.Transport(), penaltyRetry)
		for range 3 {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items"))
			require.NoError(t, err)
			drain(resp)
			assert.Equal(t, 403, resp.StatusCode)
		}
		assert.EqualValues(t, 3, srv.Stats().Banned, "each sent once")
	})
}

// outsideBurst sends requests straight to srv until one is throttled: another
// client of the same key, which spends its quota and more. It sends none
// into the block it begins.
func outsideBurst(t *testing.T, srv *fakeserver.Server) {
	for {
		resp := mustRoundTrip(t, srv.Transport(), "http://api.test/other")
		drain(resp)
		if resp.StatusCode != http.StatusOK {
			return
		}
	}
}

func mustRoundTrip(t *testing.T, rt http.RoundTripper, url string) *http.Response {
	t.Helper()
	resp, err := rt.RoundTrip(mustReq(t, url))
	require.NoError(t, err)
	return resp
}

// A try whose caller gives up while it waits to leave, admitted at the
// instant its context ended, does not hold the key's next tries.
func TestAnAbandonedTryDoesNotHoldTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := penaltyServer(fakeserver.Penalty{Block: 2 * time.Second, BlockStates: fakeserver.StateNothing})
		tr := New(srv.Transport(), WithLimit(PerSecond(10).WithBurst(10)), WithRetry(RetryOptions{MaxAttempts: 1}))
		outsideBurst(t, srv)
		for range 2 {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items"))
			require.NoError(t, err)
			drain(resp)
		}
		// Callers that give up at the very instant their try may leave.
		for range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items").WithContext(ctx))
			if err == nil {
				drain(resp)
			}
			cancel()
		}
		time.Sleep(time.Minute)
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/items"))
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 200, resp.StatusCode, "the key goes on once the block is over")
	})
}

// A key with no limits, against a bucket of 10/s burst 10 that blocks a
// violation for 30 s and says nothing of it (bare 429s, or only the
// window's wait), meets the block its first burst begins and no other:
// it resumes at what that burst let through a second, and climbs back
// over several blocks' time. (It met one every 90 s: each try refused in
// the block cut its pace, and the climb of 12 s went back past it.)
func TestABlockIsMetOnceByAKeyThatLearns(t *testing.T) {
	for _, c := range []struct {
		name    string
		dialect fakeserver.Dialect
		states  fakeserver.BlockStatement
	}{
		{"bare", fakeserver.Bare{}, fakeserver.StateNothing},
		{"window", fakeserver.RetryAfterSeconds{}, fakeserver.StateWindow},
	} {
		for _, workers := range []int{1, 8, 32} {
			t.Run(fmt.Sprintf("%s/%d", c.name, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv := fakeserver.New(fakeserver.Config{Limit: 10, Burst: 10, Dialect: c.dialect,
						Penalty: fakeserver.Penalty{Block: 30 * time.Second, BlockStates: c.states},
						Faults:  fakeserver.Faults{Latency: 5 * time.Millisecond}})
					r := penaltyRun(t, srv, 1000, workers, 0, penaltyRetry)
					t.Logf("%v", r)
					assert.Zero(t, r.failed, "%v", r.errs)
					assert.EqualValues(t, 1, r.st.Rejected, "blocks begun")
				})
			})
		}
	}
}

// A key with no limits, against a server that blocks a violation for 10 s
// or 30 s and says so in Retry-After (the block's end, as GitHub's
// secondary limit and penalty boxes do), meets the block its first burst
// begins and few others. A wait that long after a quota spent within a
// fraction of a second may be a window's or a block's: the key resumes at
// what the burst let through a second, and climbs back slowly, where it
// took the server for a window of its burst a wait, sent that at once
// after each wait, and a request more to find the window's end, which
// began the next block: one a cycle (29 in 300 requests against a bucket
// of 10/s).
func TestABlockStatedInRetryAfterIsNotTakenForAWindow(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   fakeserver.Config
		block time.Duration
		n     int
	}{
		{"bucket", fakeserver.Config{Limit: 10, Burst: 10}, 10 * time.Second, 300},
		{"bucket", fakeserver.Config{Limit: 10, Burst: 10}, 30 * time.Second, 300},
		{"window", fakeserver.Config{Algorithm: fakeserver.FixedWindow, Limit: 20, Window: time.Second}, 10 * time.Second, 400},
		{"log", fakeserver.Config{Algorithm: fakeserver.SlidingWindow, Limit: 20, Window: time.Second}, 10 * time.Second, 400},
	} {
		for _, workers := range []int{1, 8, 32} {
			t.Run(fmt.Sprintf("%s/%v/%d", c.name, c.block, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg := c.cfg
					cfg.Dialect = fakeserver.RetryAfterSeconds{}
					cfg.Penalty = fakeserver.Penalty{Block: c.block, BlockStates: fakeserver.StateBlockEnd}
					cfg.Faults = fakeserver.Faults{Latency: 5 * time.Millisecond}
					r := penaltyRun(t, fakeserver.New(cfg), c.n, workers, 0, penaltyRetry)
					t.Logf("%v", r)
					assert.Zero(t, r.failed, "%v", r.errs)
					assert.LessOrEqual(t, r.st.Rejected, int64(2), "blocks begun")
				})
			})
		}
	}
}

// A key with no limits meets a ban of 5 minutes after 5 violations (a
// block of 10 s begun by its first burst, and the burst's requests in
// flight into it), answered with 403s whose body names a secondary rate
// limit and no Retry-After (the root reads a minute in it, as GitHub
// asks). Its tries after each minute are refused until the ban ends; they
// measure no rate, and the key goes on after it at the pace it had. (It
// took the first try's 403 for the cycle since the block's end, which
// let nothing through in 50 s, and crawled at 0.5/s for the rest: a
// request in the last second, 17m38s for 300 requests, in about half
// the runs with 8 workers.)
func TestABanAfterABlockLeavesThePaceAsItWas(t *testing.T) {
	ban := fakeserver.Penalty{Block: 10 * time.Second, BanAfter: 5,
		BanBody: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`}
	for _, workers := range []int{8, 16, 32} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			// How the first burst's answers come back decides which try
			// came first: several runs.
			for range 8 {
				synctest.Test(t, func(t *testing.T) {
					r := penaltyRun(t, penaltyServer(ban), 300, workers, 0, penaltyRetry)
					t.Logf("%v", r)
					assert.Zero(t, r.failed, "%v", r.errs)
					assert.LessOrEqual(t, r.st.Bans, int64(1))
					// The bucket's 10 a second, or 9 at the pace kept.
					assert.GreaterOrEqual(t, r.lastSecond, 8, "back at its pace after the ban")
				})
			}
		})
	}
}

// A key with no limits, against fixed windows and logs of 20 a second
// that block a violation for 2 s and answer in it with the window's wait
// (Retry-After: 1): the first try after that wait is refused, and is no
// cycle that measures a rate: the key meets the block its first burst
// begins and one more at most. (Taken for a cycle since the wait, which
// let nothing through, it set the pace, and the key met 3.)
func TestATryRefusedAfterTheWaitNamedMeasuresNoCycle(t *testing.T) {
	for _, alg := range []fakeserver.Algorithm{fakeserver.FixedWindow, fakeserver.SlidingWindow} {
		for _, workers := range []int{1, 8, 32} {
			t.Run(fmt.Sprintf("%v/%d", alg, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv := fakeserver.New(fakeserver.Config{Algorithm: alg, Limit: 20, Window: time.Second,
						Penalty: fakeserver.Penalty{Block: 2 * time.Second, BlockStates: fakeserver.StateWindow},
						Faults:  fakeserver.Faults{Latency: 5 * time.Millisecond}})
					r := penaltyRun(t, srv, 400, workers, 0, penaltyRetry)
					t.Logf("%v", r)
					assert.Zero(t, r.failed, "%v", r.errs)
					assert.LessOrEqual(t, r.st.Rejected, int64(2), "blocks begun")
				})
			})
		}
	}
}
