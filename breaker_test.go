package headway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	rows := []struct {
		name     string
		resp     *http.Response
		err      error
		ctxErr   error
		throttle bool
		want     outcome
	}{
		{"200", resp(200), nil, nil, false, outcomeSuccess},
		{"301", resp(301), nil, nil, false, outcomeSuccess},
		{"400", resp(400), nil, nil, false, outcomeSuccess},
		{"404", resp(404), nil, nil, false, outcomeSuccess},
		{"429 is a throttle, not an outage", resp(429), nil, nil, false, outcomeSuccess},
		{"500", resp(500), nil, nil, false, outcomeFailure},
		{"501 refuses the request, not the load", resp(501), nil, nil, false, outcomeSuccess},
		{"502", resp(502), nil, nil, false, outcomeFailure},
		{"503", resp(503), nil, nil, false, outcomeFailure},
		{"504", resp(504), nil, nil, false, outcomeFailure},
		{"505 refuses the request, not the load", resp(505), nil, nil, false, outcomeSuccess},
		{"507", resp(507), nil, nil, false, outcomeFailure},
		{"529, an overload", resp(529), nil, nil, false, outcomeFailure},
		{"reset", nil, errReset, nil, false, outcomeFailure},
		{"EOF", nil, errEOF, nil, false, outcomeFailure},
		{"a timeout of the transport", nil, fmt.Errorf("x: %w", context.DeadlineExceeded), nil, false, outcomeFailure},
		{"caller cancelled", nil, context.Canceled, context.Canceled, false, outcomeExcluded},
		{"caller's deadline", nil, context.DeadlineExceeded, context.DeadlineExceeded, false, outcomeExcluded},
		{"cancelled without the caller's context", nil, fmt.Errorf("x: %w", context.Canceled), nil, false, outcomeExcluded},
		{"a 503 after the caller gave up", resp(503), nil, context.Canceled, false, outcomeExcluded},
		{"a 503 that states its wait", resp(503), nil, nil, true, outcomeSuccess},
		{"a 529 that states its wait", resp(529), nil, nil, true, outcomeSuccess},
		{"a transport error is never a throttle", nil, errReset, nil, true, outcomeFailure},
	}
	for _, r := range rows {
		assert.Equal(t, r.want, classify(r.resp, r.err, r.ctxErr, r.throttle), r.name)
	}
	assert.Equal(t, "success", outcomeSuccess.String())
	assert.Equal(t, "failure", outcomeFailure.String())
	assert.Equal(t, "excluded", outcomeExcluded.String())
}

// record sends one request through b with outcome o, failing the test if
// b refuses it.
func record(t *testing.T, b *breaker, o outcome) {
	t.Helper()
	done, err := b.allow(time.Now())
	require.NoError(t, err)
	done(o)
}

// retryIn returns how long after now b will let a probe through: zero
// unless it is open.
func retryIn(b *breaker, now time.Time) time.Duration {
	if b.state() != BreakerOpen {
		return 0
	}
	return max(b.retryAt().Sub(now), 0)
}

func requireOpen(t *testing.T, b *breaker, wait time.Duration) *CircuitOpenError {
	t.Helper()
	_, err := b.allow(time.Now())
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrCircuitOpen)
	assert.ErrorIs(t, err, gobreaker.ErrOpenState)
	assert.NotErrorIs(t, err, gobreaker.ErrTooManyRequests)
	var ce *CircuitOpenError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, BreakerOpen, ce.State)
	assert.Equal(t, wait, ce.RetryIn)
	assert.Equal(t, time.Now().Add(wait), ce.RetryAt)
	assert.Equal(t, wait, retryIn(b, time.Now()))
	assert.Equal(t, BreakerOpen, b.state())
	return ce
}

func TestBreakerOpensOnConsecutiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("api.test", BreakerSettings{})
		for range 4 {
			record(t, b, outcomeFailure)
		}
		record(t, b, outcomeSuccess) // breaks the run
		for range 4 {
			record(t, b, outcomeFailure)
		}
		assert.Equal(t, BreakerClosed, b.state())
		assert.Zero(t, retryIn(b, time.Now()))
		record(t, b, outcomeFailure) // the fifth in a row
		ce := requireOpen(t, b, defaultBreakerTimeout)
		assert.Equal(t, "headway: circuit open, next probe in 30s", ce.Error())
		assert.NotContains(t, ce.Error(), "api.test", "keys may hold credentials")

		time.Sleep(10 * time.Second)
		requireOpen(t, b, 20*time.Second)
		time.Sleep(20 * time.Second)
		requireOpen(t, b, 0) // probes go through strictly after RetryAt
		time.Sleep(time.Nanosecond)
		assert.Equal(t, BreakerHalfOpen, b.state())
		assert.Zero(t, retryIn(b, time.Now()))
	})
}

func TestBreakerOpensOnFailureRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("k", BreakerSettings{ConsecutiveFailures: -1, MinRequests: 10, FailureRatio: 0.5})
		for range 4 {
			record(t, b, outcomeFailure)
		}
		for range 5 {
			record(t, b, outcomeSuccess)
		}
		assert.Equal(t, BreakerClosed, b.state(), "4 of 9: below the ratio")
		record(t, b, outcomeFailure)
		requireOpen(t, b, defaultBreakerTimeout) // 5 of 10
	})
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("k", BreakerSettings{ConsecutiveFailures: -1, MinRequests: 10})
		for range 9 {
			record(t, b, outcomeFailure)
		}
		assert.Equal(t, BreakerClosed, b.state(), "9 failures in a row, but fewer than MinRequests")
		record(t, b, outcomeFailure)
		requireOpen(t, b, defaultBreakerTimeout)
	})
}

func TestBreakerForgetsOutcomesOutsideItsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("k", BreakerSettings{ConsecutiveFailures: -1, MinRequests: 10, Interval: 10 * time.Second})
		for range 9 {
			record(t, b, outcomeFailure)
		}
		time.Sleep(11 * time.Second)
		record(t, b, outcomeFailure)
		assert.Equal(t, BreakerClosed, b.state(), "the nine are forgotten")
		for range 9 {
			record(t, b, outcomeFailure)
		}
		assert.Equal(t, BreakerOpen, b.state())
	})
}

func TestBreakerIgnoresThrottlesAndCancellations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("k", BreakerSettings{})
		for _, code := range []int{429, 429, 429, 400, 403, 404, 429, 429} {
			record(t, b, outcomeFailure)
			record(t, b, classify(&http.Response{StatusCode: code}, nil, nil, false))
			record(t, b, classify(&http.Response{StatusCode: code}, nil, nil, false))
		}
		for range 20 {
			record(t, b, classify(nil, context.Canceled, context.Canceled, false))
			record(t, b, classify(&http.Response{StatusCode: 503}, nil, context.DeadlineExceeded, true))
		}
		assert.Equal(t, BreakerClosed, b.state())
		c := b.cb.Counts()
		assert.Equal(t, uint32(40), c.TotalExclusions)
		assert.Equal(t, uint32(8), c.TotalFailures)
		assert.Equal(t, uint32(16), c.TotalSuccesses, "8 failures of 24: below the ratio")
		assert.Zero(t, c.ConsecutiveFailures, "each failure was followed by a success")
	})
}

func TestBreakerHalfOpenProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("k", BreakerSettings{ConsecutiveFailures: 1, MaxRequests: 2, Timeout: time.Minute})
		record(t, b, outcomeFailure)
		requireOpen(t, b, time.Minute)
		time.Sleep(time.Minute + 1)
		assert.Equal(t, BreakerHalfOpen, b.state())

		p1, err := b.allow(time.Now())
		require.NoError(t, err)
		p2, err := b.allow(time.Now())
		require.NoError(t, err)
		_, err = b.allow(time.Now())
		require.Error(t, err, "two probes at most")
		assert.ErrorIs(t, err, ErrCircuitOpen)
		assert.ErrorIs(t, err, gobreaker.ErrTooManyRequests)
		assert.NotErrorIs(t, err, gobreaker.ErrOpenState)
		var ce *CircuitOpenError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, BreakerHalfOpen, ce.State)
		assert.True(t, ce.RetryAt.IsZero())
		assert.Zero(t, ce.RetryIn)
		assert.Equal(t, "headway: circuit half-open, every probe in flight", ce.Error())

		p2(outcomeExcluded) // a probe not sent after all frees its slot
		p2(outcomeFailure)  // and a second call is ignored
		p3, err := b.allow(time.Now())
		require.NoError(t, err)
		p1(outcomeSuccess)
		assert.Equal(t, BreakerHalfOpen, b.state(), "one success of two")
		p3(outcomeSuccess)
		assert.Equal(t, BreakerClosed, b.state())
	})
}

func TestBreakerHalfOpenFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("k", BreakerSettings{ConsecutiveFailures: 1, Timeout: time.Minute})
		record(t, b, outcomeFailure)
		time.Sleep(time.Minute + 1)
		record(t, b, outcomeFailure)
		requireOpen(t, b, time.Minute)
	})
}

func TestBreakerDropsOutcomesFromBeforeAStateChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("k", BreakerSettings{ConsecutiveFailures: 1, Timeout: time.Minute})
		late, err := b.allow(time.Now())
		require.NoError(t, err)
		record(t, b, outcomeFailure)
		time.Sleep(time.Minute + 1)
		late(outcomeFailure) // sent while closed: not the probe's verdict
		assert.Equal(t, BreakerHalfOpen, b.state())
	})
}

// transition is one call of OnStateChange.
type transition struct{ from, to BreakerState }

func TestBreakerStateHookOutsideTheLockAndInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			b      *breaker
			got    []transition
			keys   []string
			inside atomic.Int32
		)
		b = newBreaker("api.test", BreakerSettings{
			ConsecutiveFailures: 2, Timeout: time.Minute,
			OnStateChange: func(key string, from, to BreakerState) {
				require.Equal(t, int32(1), inside.Add(1), "one call at a time")
				defer inside.Add(-1)
				got = append(got, transition{from, to})
				keys = append(keys, key)
				// Under gobreaker's lock, each of these would deadlock.
				_ = b.state()
				_ = retryIn(b, time.Now())
				if done, err := b.allow(time.Now()); err == nil {
					done(outcomeExcluded)
				}
			},
		})
		record(t, b, outcomeFailure)
		record(t, b, outcomeFailure) // closed -> open
		time.Sleep(time.Minute + 1)
		record(t, b, outcomeFailure) // open -> half-open -> open
		time.Sleep(time.Minute + 1)
		record(t, b, outcomeSuccess) // open -> half-open -> closed
		assert.Equal(t, []transition{
			{BreakerClosed, BreakerOpen},
			{BreakerOpen, BreakerHalfOpen},
			{BreakerHalfOpen, BreakerOpen},
			{BreakerOpen, BreakerHalfOpen},
			{BreakerHalfOpen, BreakerClosed},
		}, got)
		assert.Equal(t, []string{"api.test", "api.test", "api.test", "api.test", "api.test"}, keys)
		assert.Equal(t, "half-open", BreakerHalfOpen.String())
		assert.Equal(t, "BreakerState(9)", BreakerState(9).String())
	})
}

func TestBreakerStateHookUnderConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			got    []transition
			inside atomic.Int32
			over   atomic.Bool
		)
		b := newBreaker("k", BreakerSettings{
			ConsecutiveFailures: 3, MaxRequests: 2, Timeout: 50 * time.Millisecond,
			OnStateChange: func(_ string, from, to BreakerState) {
				if inside.Add(1) != 1 {
					over.Store(true)
				}
				mu.Lock()
				got = append(got, transition{from, to})
				mu.Unlock()
				time.Sleep(time.Millisecond) // let others change the state meanwhile
				inside.Add(-1)
			},
		})
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 300 {
					done, err := b.allow(time.Now())
					if err == nil {
						o := outcomeSuccess
						if (g+i)%3 != 0 {
							o = outcomeFailure
						}
						done(o)
					}
					time.Sleep(time.Duration(1+g%5) * time.Millisecond)
				}
			})
		}
		wg.Wait()
		b.state() // deliver anything left
		assert.False(t, over.Load(), "the hook ran concurrently with itself")
		mu.Lock()
		defer mu.Unlock()
		require.Greater(t, len(got), 10, "the test should change the state often")
		t.Logf("%d transitions", len(got))
		assert.Equal(t, BreakerClosed, got[0].from)
		for i := 1; i < len(got); i++ {
			require.Equal(t, got[i-1].to, got[i].from, "transition %d out of order: %v", i, got)
		}
		assert.Equal(t, got[len(got)-1].to, b.state())
	})
}

func TestBreakerStateHookPanicDoesNotWedgeIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []transition
		b := newBreaker("k", BreakerSettings{
			ConsecutiveFailures: 1, Timeout: time.Minute,
			OnStateChange: func(_ string, from, to BreakerState) {
				got = append(got, transition{from, to})
				if len(got) == 1 {
					panic("hook")
				}
			},
		})
		done, err := b.allow(time.Now())
		require.NoError(t, err)
		assert.PanicsWithValue(t, "hook", func() { done(outcomeFailure) })
		time.Sleep(time.Minute + 1)
		record(t, b, outcomeSuccess)
		assert.Equal(t, []transition{
			{BreakerClosed, BreakerOpen},
			{BreakerOpen, BreakerHalfOpen},
			{BreakerHalfOpen, BreakerClosed},
		}, got)
	})
}

func TestBreakerDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("k", BreakerSettings{FailureRatio: -1, ConsecutiveFailures: -1})
		for range 100 {
			record(t, b, outcomeFailure)
		}
		assert.Equal(t, BreakerClosed, b.state(), "both rules disabled: never opens")
	})
}

func TestRetryLoopWithTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 503}}}
		tr := retryTransport(base, RetryOptions{MaxAttempts: 10}, nil, WithBreaker(BreakerSettings{ConsecutiveFailures: 3}))
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/x"))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "the attempt that opened the breaker is the last")
		drain(resp)
		assert.Len(t, base.sent, 3)

		_, err = tr.RoundTrip(mustReq(t, "http://api.test/x"))
		assert.ErrorIs(t, err, ErrCircuitOpen)
		var re *RetryError
		assert.False(t, errors.As(err, &re), "refused before any attempt: the error as it is")
		assert.Len(t, base.sent, 3)

		// Opened by another request between two attempts: the retry fails
		// at once. After a transport error that is the error, wrapped with
		// the attempts made; after a response, that response is the answer.
		for _, first := range []step{{err: errReset}, {status: 502}} {
			base2 := &stepRT{steps: []step{first}}
			tr2 := retryTransport(&sleepyRT{base2, 2 * time.Millisecond}, RetryOptions{MaxAttempts: 10},
				func(n int64) int64 { return n - 1 }, // wait 500ms before the retry
				WithBreaker(BreakerSettings{ConsecutiveFailures: 2}))
			br2 := tr2.keys.get("api.test", tr2, mustReq(t, "http://api.test/x")).br
			go func() {
				time.Sleep(100 * time.Millisecond)
				record(t, br2, outcomeFailure)
			}()
			resp, err := tr2.RoundTrip(mustReq(t, "http://api.test/x"))
			assert.Len(t, base2.sent, 1)
			if first.err == nil {
				require.NoError(t, err)
				assert.Equal(t, 502, resp.StatusCode)
				drain(resp)
				continue
			}
			require.ErrorAs(t, err, &re)
			assert.Equal(t, 1, re.Attempts)
			assert.ErrorIs(t, err, ErrCircuitOpen)
			assert.ErrorIs(t, err, gobreaker.ErrOpenState)
		}
	})
}

// A server that answers 501 or 505 works: it refuses the request, not the
// load. The breaker of its key stays closed however many come, as the
// outage state holds nothing for them, and the key's other requests go
// on. Before, each counted as a failure of the host, and a client calling
// an endpoint its server does not implement opened the breaker of the
// whole host.
func TestTheBreakerDoesNotOpenOnRequestsTheServerRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 501}, {status: 505}, {status: 501}, {status: 505}, {status: 501}, {status: 200}}}
		tr := New(base, WithBreaker(BreakerSettings{ConsecutiveFailures: 2}))
		for i, want := range []int{501, 505, 501, 505, 501, 200} {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/x"))
			require.NoError(t, err, "request %d", i)
			drain(resp)
			assert.Equal(t, want, resp.StatusCode, "request %d", i)
		}
		assert.Len(t, base.sent, 6, "each sent once, none refused")
		k := tr.keys.get("api.test", tr, mustReq(t, "http://api.test/x"))
		assert.Equal(t, BreakerClosed, k.br.state())
		assert.False(t, k.isDown())
	})
}

// sleepyRT takes d to answer.
type sleepyRT struct {
	http.RoundTripper
	d time.Duration
}

func (s *sleepyRT) RoundTrip(req *http.Request) (*http.Response, error) {
	time.Sleep(s.d)
	return s.RoundTripper.RoundTrip(req)
}

func TestTheBreakerDoesNotOpenOnOverloadsThatStateTheirWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Five 503s and 529s that say when to come back, then a bare
		// 503: the first five pause the key as a 429 would, and only
		// the bare one is a failure of the host.
		ra := []string{"Retry-After", "1"}
		base := &stepRT{steps: []step{
			{status: 503, kv: ra}, {status: 529, kv: ra}, {status: 503, kv: ra},
			{status: 529, kv: ra}, {status: 503, kv: ra}, {status: 503}, {status: 200},
		}}
		tr := New(base, WithRetry(RetryOptions{MaxAttempts: 1, ProbeInterval: -1}), WithBreaker(BreakerSettings{ConsecutiveFailures: 2}))
		k := tr.keys.get("api.test", tr, mustReq(t, "http://api.test/x"))
		for i, want := range []int{503, 529, 503, 529, 503, 503, 200} {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/x"))
			require.NoError(t, err, "request %d", i)
			drain(resp)
			assert.Equal(t, want, resp.StatusCode, "request %d", i)
			assert.Equal(t, BreakerClosed, k.br.state(), "after request %d", i)
		}
		assert.Len(t, base.sent, 7)
		for i := 1; i < 6; i++ {
			assert.GreaterOrEqual(t, base.sent[i].Sub(base.sent[i-1]), time.Second, "request %d waits the stated second", i)
		}
	})
}
