package headway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longOutage is the workload in virtual time (8 workers, 600 GETs
// at 100 a second, 5 ms answers, 30 attempts) meeting an outage of 60 s
// from 2 s on, through tr made of w by mk. It returns what outageRun
// returns, and the outage's span.
func longOutage(t *testing.T, shape fakeserver.OutageShape, retry RetryOptions, mk func(w *watchRT) *Transport) (w *watchRT, srv *fakeserver.Server, from, to time.Time, failed int64, errs []error, took time.Duration) {
	srv = fakeserver.New(fakeserver.Config{Limit: 100, Burst: 10,
		Faults: fakeserver.Faults{Outage: shape, Latency: 5 * time.Millisecond}})
	start := time.Now()
	from, to = start.Add(2*time.Second), start.Add(62*time.Second)
	srv.SetOutage(from, to)
	w = &watchRT{base: timeoutRT{srv.Transport(), 200 * time.Millisecond}, downFrom: from, downTo: to}
	tr := mk(w)
	failed, errs = outageRun(t, tr, 600, 8)
	took = time.Since(start)
	return
}

// TestHoldLosesNothingToALongOutage: in hold mode (BreakerSettings.Hold) an
// outage four times longer than the 30 attempts of the request at the head
// of the queue would last as probes loses nothing: a probe's failure spends
// neither an attempt nor the retry budget. The probes still go one at a
// time, on the outage state's schedule (200 ms ×2 up to 500 ms) until the
// breaker opens, then at its Timeout if that is longer; the queue drains at
// full pace as soon as a probe finds the host back.
func TestHoldLosesNothingToALongOutage(t *testing.T) {
	type tc struct {
		shape   fakeserver.OutageShape
		timeout time.Duration // the breaker's
		budget  BudgetOptions
	}
	var cases []tc
	for _, shape := range []fakeserver.OutageShape{fakeserver.OutageError, fakeserver.OutageReset} {
		cases = append(cases, tc{shape, 0, BudgetOptions{}}, // the default: the outage state's schedule
			tc{shape, 200 * time.Millisecond, BudgetOptions{}}, tc{shape, time.Second, BudgetOptions{}},
			// Half a retry a second: five a window, for probes at two a second.
			tc{shape, 200 * time.Millisecond, BudgetOptions{MinPerSecond: 0.5}})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/open %v/budget floor %v", c.shape, c.timeout, c.budget.MinPerSecond), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				retry := batchRetry
				retry.Budget = c.budget
				w, srv, from, to, failed, errs, took := longOutage(t, c.shape, retry, func(w *watchRT) *Transport {
					return New(w, WithLimit(PerSecond(100).WithBurst(9)), WithRetry(retry),
						WithBreaker(BreakerSettings{Timeout: c.timeout, Hold: true}))
				})
				assert.Zero(t, failed, "%v", errs)
				assert.EqualValues(t, 600, srv.Stats().Admitted, "every record delivered")
				assert.Equal(t, 1, w.peakDown, "one request at a time while the host is down")

				// The schedule: the first failure, then probes 200 ms, 400
				// ms, then 500 ms apart, each from the last failure (at
				// once for a reset, 5 ms for a 500); from the fifth
				// failure in a row on the breaker is open, and a probe
				// waits for its Timeout as well.
				lat := 5 * time.Millisecond
				if c.shape == fakeserver.OutageReset {
					lat = 0
				}
				into := w.sentIn(from, to)
				require.Greater(t, len(into), 60, "probes over 60 s")
				iv := 200 * time.Millisecond
				for i := 1; i < len(into); i++ {
					want := iv
					if i >= defaultConsecutiveFailures && c.timeout > iv {
						// gobreaker lets a probe through after its open
						// time, not at its last instant: the one refused
						// then is offered again holdRecheck later.
						want = c.timeout + holdRecheck
					}
					assert.Equal(t, want+lat, into[i].Sub(into[i-1]), "gap before probe %d", i)
					iv = min(2*iv, 500*time.Millisecond)
				}
				wantProbes := int(60 * time.Second / max(500*time.Millisecond, c.timeout))
				assert.InDelta(t, wantProbes, len(into), 4, "sent into the outage")

				// The drain: the first request after the outage is a probe,
				// sent at most one interval after the host's return; the
				// next leaves one pacing interval (10 ms) after its answer,
				// and the rest of the work takes its least time, 5.8 s (600
				// less two bursts at 100 a second), plus a few latencies.
				after := w.sentIn(to, to.Add(time.Hour))
				require.GreaterOrEqual(t, len(after), 2)
				lag := after[0].Sub(to)
				assert.LessOrEqual(t, lag, max(500*time.Millisecond, c.timeout+holdRecheck)+lat, "the host waited for its probe")
				assert.LessOrEqual(t, after[1].Sub(after[0]), 10*time.Millisecond+5*time.Millisecond, "latency of the probe plus one interval")
				least := 60*time.Second + (600-20)*10*time.Millisecond
				assert.LessOrEqual(t, took-lag, least+100*time.Millisecond, "the drain at full pace")
				t.Logf("took %v: least %v + lag %v + %v; %d sent into the outage", took, least, lag, took-least-lag, len(into))
			})
		})
	}
}

// TestByDefaultAProbeSpendsItsAttempts: without hold mode the same outage
// fails the request at the head of the queue once its 30 attempts are
// spent as probes, some 15 s in; then the next one probes. A request to a
// host that stays down ends after its attempts.
func TestByDefaultAProbeSpendsItsAttempts(t *testing.T) {
	for _, shape := range []fakeserver.OutageShape{fakeserver.OutageError, fakeserver.OutageReset} {
		for _, br := range []*BreakerSettings{nil, {Timeout: 200 * time.Millisecond, ConsecutiveFailures: -1, FailureRatio: -1}} {
			t.Run(fmt.Sprintf("%v/breaker %v", shape, br != nil), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					_, srv, _, _, failed, errs, _ := longOutage(t, shape, batchRetry, func(w *watchRT) *Transport {
						opts := []Option{WithLimit(PerSecond(100).WithBurst(9)), WithRetry(batchRetry)}
						if br != nil {
							// A breaker that never opens, failing fast: the
							// outage state alone, as without one.
							opts = append(opts, WithBreaker(*br))
						}
						return New(w, opts...)
					})
					// 60 s at two probes a second, 30 attempts each (the
					// first failure and 29 probes, less for the first).
					assert.InDelta(t, 4, failed, 1, "%v", errs)
					assert.EqualValues(t, 600-failed, srv.Stats().Admitted)
					for _, err := range errs {
						if shape == fakeserver.OutageError {
							assert.EqualError(t, err, "status 500", "the last response")
							continue
						}
						var re *RetryError
						if assert.ErrorAs(t, err, &re) {
							assert.Equal(t, 30, re.Attempts)
						}
					}
				})
			})
		}
	}
}

// holdDeadHost sends one GET, with ctx, through a Transport in hold mode to
// a host that resets every connection, and returns its error, how long it
// took and how many attempts reached the host.
func holdDeadHost(t *testing.T, ctx context.Context, retry RetryOptions, opts ...Option) (took time.Duration, sent int64, err error) {
	srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000,
		Faults: fakeserver.Faults{Outage: fakeserver.OutageReset}})
	start := time.Now()
	srv.SetOutage(start, start.Add(time.Hour))
	opts = append(opts, WithRetry(retry), WithBreaker(BreakerSettings{Timeout: 100 * time.Millisecond, Hold: true}))
	tr := New(srv.Transport(), opts...)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		drain(resp)
		t.Fatal("an answer from a host that resets every connection")
	}
	return time.Since(start), srv.Stats().Outage, err
}

// TestAHeldProbeIsBoundedByItsDeadlineMaxElapsedAndMaxWait: in hold mode a
// probe's failures spend no attempt, but its request still ends when its
// context's deadline, MaxElapsed or MaxWait would pass before the next
// probe, at once, with the *WaitError that says so (in a *RetryError:
// attempts were sent), and a request whose retries are off is not
// retried.
func TestAHeldProbeIsBoundedByItsDeadlineMaxElapsedAndMaxWait(t *testing.T) {
	// Probes from the first failure at 0: 200 ms, 600 ms, then every 500 ms.
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			took, sent, err := holdDeadHost(t, ctx, RetryOptions{MaxAttempts: 2})
			var re *RetryError
			require.ErrorAs(t, err, &re, "%v", err)
			var we *WaitError
			require.ErrorAs(t, err, &we)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, 2600*time.Millisecond, took, "failed at once when the probe at 3.1 s could not be its")
			assert.Equal(t, 3100*time.Millisecond-took, we.Wait)
			assert.Equal(t, 400*time.Millisecond, we.Allowed)
			assert.False(t, we.NextProbe.IsZero())
			assert.EqualValues(t, 7, sent, "the first attempt and 6 probes, for 2 attempts")
			assert.Equal(t, 7, re.Attempts, "attempts sent")
		})
	})
	t.Run("MaxElapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			took, sent, err := holdDeadHost(t, context.Background(), RetryOptions{MaxAttempts: 2, MaxElapsed: 3 * time.Second})
			var we *WaitError
			require.ErrorAs(t, err, &we, "%v", err)
			assert.Equal(t, 2600*time.Millisecond, took)
			assert.Equal(t, 400*time.Millisecond, we.Allowed, "what is left of MaxElapsed")
			assert.EqualValues(t, 7, sent)
		})
	})
	t.Run("MaxWait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			took, sent, err := holdDeadHost(t, context.Background(), RetryOptions{MaxAttempts: 2},
				WithQueue(QueueOptions{MaxWait: 300 * time.Millisecond}))
			var we *WaitError
			require.ErrorAs(t, err, &we, "%v", err)
			assert.Equal(t, 300*time.Millisecond, we.Allowed)
			assert.Equal(t, 200*time.Millisecond, took, "the probe at 200 ms fit, the next 400 ms later does not")
			assert.EqualValues(t, 2, sent)
		})
	})
	t.Run("retries off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000,
				Faults: fakeserver.Faults{Outage: fakeserver.OutageReset}})
			start := time.Now()
			srv.SetOutage(start, start.Add(time.Hour))
			tr := New(srv.Transport(), WithRetry(RetryOptions{MaxAttempts: 1}),
				WithBreaker(BreakerSettings{Timeout: 100 * time.Millisecond, Hold: true}))
			for i := range 3 {
				// The first request meets the outage, the others probe.
				_, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
				var re *RetryError
				if assert.ErrorAs(t, err, &re) {
					assert.Equal(t, 1, re.Attempts, "request %d", i)
				}
				assert.False(t, errors.Is(err, ErrWaitTooLong))
			}
			assert.EqualValues(t, 3, srv.Stats().Outage)
		})
	})
}

// TestAFleetInHoldModeLosesNothingToALongOutage: 4 processes sharing their
// outages (2 workers each, 600 GETs in all) meet the 60 s outage of 500s
// with 30 attempts. The probe whose turn it is may be any process's: in
// hold mode none spends an attempt, and nothing fails; without it, the
// requests whose 30 attempts the probes spent fail. Either way the fleet
// sends one probe at a time, on the single process's schedule.
func TestAFleetInHoldModeLosesNothingToALongOutage(t *testing.T) {
	for _, hold := range []bool{true, false} {
		t.Run(fmt.Sprintf("hold %v", hold), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fakeserver.New(fakeserver.Config{Limit: 100, Burst: 10,
					Faults: fakeserver.Faults{Outage: fakeserver.OutageError, Latency: 5 * time.Millisecond}})
				start := time.Now()
				srv.SetOutage(start.Add(2*time.Second), start.Add(62*time.Second))
				f := newMemFleet()
				var (
					wg      sync.WaitGroup
					mu      sync.Mutex
					failed  int
					remains = 600
				)
				for i := range 4 {
					opts := []Option{WithLimit(PerSecond(100).WithBurst(9)), WithRetry(batchRetry), WithSharedQuota(f.view(i + 1))}
					if hold {
						opts = append(opts, WithBreaker(BreakerSettings{Hold: true, Timeout: 200 * time.Millisecond}))
					}
					tr := New(timeoutRT{srv.Transport(), 200 * time.Millisecond}, opts...)
					for range 2 {
						wg.Go(func() {
							for {
								mu.Lock()
								if remains == 0 {
									mu.Unlock()
									return
								}
								remains--
								mu.Unlock()
								resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
								if err == nil {
									drain(resp)
								}
								if err != nil || resp.StatusCode != 200 {
									mu.Lock()
									failed++
									mu.Unlock()
								}
							}
						})
					}
				}
				wg.Wait()
				st := srv.Stats()
				if hold {
					assert.Zero(t, failed)
					assert.EqualValues(t, 600, st.Admitted, "every record delivered")
				} else {
					assert.Positive(t, failed, "the probes spent the attempts of some requests")
				}
				// The first failures (one per process at most), then a
				// probe every 500 ms: 200, 400, then 500 ms apart.
				assert.LessOrEqual(t, st.Outage, int64(4+2+(60*time.Second-600*time.Millisecond)/(500*time.Millisecond)+1), "one probe at a time")
				t.Logf("%d failed, %d sent into the outage, took %v", failed, st.Outage, time.Since(start))
			})
		})
	}
}
