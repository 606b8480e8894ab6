package headway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordRT passes requests to base, records each request's body, and
// counts the response bodies it hands out and the ones closed.
type recordRT struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies []string
	opened atomic.Int64
	closed atomic.Int64
}

func (r *recordRT) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	r.opened.Add(1)
	resp.Body = &countClose{ReadCloser: resp.Body, n: &r.closed}
	return resp, nil
}

func (r *recordRT) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

type countClose struct {
	io.ReadCloser
	n    *atomic.Int64
	once sync.Once
}

func (c *countClose) Close() error {
	c.once.Do(func() { c.n.Add(1) })
	return c.ReadCloser.Close()
}

func post(t *testing.T, tr http.RoundTripper, body string, key string, getBody bool) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://api.test/orders", strings.NewReader(body))
	require.NoError(t, err)
	if !getBody {
		req.GetBody = nil
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	before := req.Header.Clone()
	resp, err := tr.RoundTrip(req)
	assert.Equal(t, before, req.Header, "the caller's request is not changed")
	return resp, err
}

func TestRetriesAgainstTheFakeServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000,
			Faults: fakeserver.Faults{OutageStatus: http.StatusBadGateway}})
		rec := &recordRT{base: srv.Transport()}
		tr := New(rec, WithLimit(PerSecond(1000).WithBurst(1000)), WithRetry(RetryOptions{Budget: BudgetOptions{Disable: true}}))

		// An outage: every request answers 502.
		srv.SetOutage(time.Now(), time.Now().Add(time.Hour))

		// A POST with an Idempotency-Key is sent again with the same bytes.
		resp, err := post(t, tr, `{"order":1}`, "k-1", true)
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 502, resp.StatusCode, "when attempts are spent the last response goes back")
		assert.Equal(t, []string{`{"order":1}`, `{"order":1}`, `{"order":1}`, `{"order":1}`}, rec.sent())

		// A POST without one is not sent again on a 502, nor on a 500...
		rec.bodies = nil
		resp, err = post(t, tr, `{"order":2}`, "", true)
		require.NoError(t, err)
		drain(resp)
		assert.Len(t, rec.sent(), 1)
		srv500 := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
		srv500.SetOutage(time.Now(), time.Now().Add(time.Hour))
		rec500 := &recordRT{base: srv500.Transport()}
		resp, err = post(t, New(rec500), `{"order":3}`, "", true)
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 500, resp.StatusCode)
		assert.Len(t, rec500.sent(), 1)

		// ...and neither is a body above the buffer with no GetBody.
		big := strings.Repeat("x", 2<<20)
		rec.bodies = nil
		resp, err = post(t, tr, big, "k-2", false)
		require.NoError(t, err)
		drain(resp)
		assert.Len(t, rec.sent(), 1)
		// One below it, with no GetBody, is buffered and replayed whole.
		rec.bodies = nil
		resp, err = post(t, tr, "small", "k-3", false)
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, []string{"small", "small", "small", "small"}, rec.sent())

		// Every response body headway discarded was closed, and those it
		// handed back were closed by us.
		assert.Equal(t, rec.opened.Load(), rec.closed.Load())
	})
}

func TestAPostIsRetriedOnA429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1, Window: time.Second, Burst: 1})
		rec := &recordRT{base: srv.Transport()}
		tr := New(rec, WithLimit(PerSecond(100).WithBurst(10)))
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				resp, err := post(t, tr, strings.Repeat("p", i+1), "", true)
				if assert.NoError(t, err) {
					drain(resp)
					assert.Equal(t, 200, resp.StatusCode)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 3, srv.Stats().Admitted)
		// The two retries leave together when the pause ends; if the server
		// rejects the first to arrive, the other was already on its way.
		assert.LessOrEqual(t, srv.Stats().Early, int64(1), "no request went out during a pause once it was known")
		assert.Equal(t, rec.opened.Load(), rec.closed.Load())
	})
}

func TestTheRetryBudgetStopsARetryStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000,
			Faults: fakeserver.Faults{OutageStatus: http.StatusBadGateway}})
		srv.SetOutage(time.Now(), time.Now().Add(time.Hour))
		tr := New(srv.Transport(), WithRetry(RetryOptions{
			MaxAttempts: 10,
			Budget:      BudgetOptions{Ratio: 0.2, Window: 10 * time.Second, MinPerSecond: -1},
		}))
		for range 100 {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			require.NoError(t, err)
			drain(resp)
			assert.Equal(t, 502, resp.StatusCode)
		}
		st := srv.Stats()
		// 100 requests may bring 20 retries, not 900.
		assert.LessOrEqual(t, st.Total, int64(120))
		assert.GreaterOrEqual(t, st.Total, int64(101))
	})
}

func TestTheBreakerOpensFailsFastProbesAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
		var changes []string
		var mu sync.Mutex
		tr := New(srv.Transport(),
			WithRetry(RetryOptions{MaxAttempts: 1}),
			WithBreaker(BreakerSettings{ConsecutiveFailures: 3, Timeout: 5 * time.Second, OnStateChange: func(_ string, from, to BreakerState) {
				mu.Lock()
				changes = append(changes, from.String()+">"+to.String())
				mu.Unlock()
			}}))
		send := func() (*http.Response, error) {
			resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
			drain(resp)
			return resp, err
		}
		srv.SetOutage(time.Now(), time.Now().Add(3*time.Second))
		for range 3 {
			resp, err := send()
			require.NoError(t, err)
			assert.Equal(t, 500, resp.StatusCode)
		}
		// Open: fail at once, unsent, saying when it tries again.
		start := time.Now()
		_, err := send()
		assert.ErrorIs(t, err, ErrCircuitOpen)
		var coe *CircuitOpenError
		require.ErrorAs(t, err, &coe)
		assert.Equal(t, 5*time.Second, coe.RetryIn)
		assert.Zero(t, time.Since(start))
		assert.EqualValues(t, 3, srv.Stats().Total)

		// After the open time one probe goes through; the outage is over,
		// so it succeeds and the breaker closes.
		time.Sleep(coe.RetryIn + time.Millisecond)
		resp, err := send()
		require.NoError(t, err, "%v", err)
		assert.Equal(t, 200, resp.StatusCode)
		resp, err = send()
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, []string{"closed>open", "open>half-open", "half-open>closed"}, changes)
		mu.Unlock()
	})
}

func TestAnOpenBreakerFailsTheQueueBehindIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
		srv.SetOutage(time.Now(), time.Now().Add(time.Hour))
		tr := New(srv.Transport(), WithLimit(Every(time.Second)),
			WithRetry(RetryOptions{MaxAttempts: 1}),
			WithBreaker(BreakerSettings{ConsecutiveFailures: 1, Timeout: time.Minute}))
		var wg sync.WaitGroup
		errs := make([]error, 5)
		for i := range errs {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
				drain(resp)
				errs[i] = err
			})
		}
		wg.Wait()
		open := 0
		for _, err := range errs {
			if errors.Is(err, ErrCircuitOpen) {
				open++
			}
		}
		assert.Equal(t, 4, open, "one request failed at the server, the four behind it at once")
		assert.EqualValues(t, 1, srv.Stats().Total)
	})
}

// TestAnOutageWithManyWorkers is the scenario: 32 workers, 2,000
// requests, a 3 s outage. Requests that reach the server during the outage
// are at most the half-open probes plus those in flight when it began, and
// every request succeeds after recovery.
func TestAnOutageWithManyWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 100,
			Faults: fakeserver.Faults{Latency: 5 * time.Millisecond}})
		tr := New(srv.Transport(), WithLimit(PerSecond(200).WithBurst(10)),
			WithBreaker(BreakerSettings{ConsecutiveFailures: 5, Timeout: time.Second}))
		const n, workers = 2000, 32
		var next, failed atomic.Int64
		start := time.Now()
		srv.SetOutage(start.Add(2*time.Second), start.Add(5*time.Second))
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= n {
					for {
						resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
						if err == nil {
							drain(resp)
							if resp.StatusCode == 200 {
								break
							}
						}
						failed.Add(1)
						// A batch job waits a little and tries the record again.
						time.Sleep(200 * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		st := srv.Stats()
		assert.EqualValues(t, n, st.Admitted, "every request succeeded after recovery")
		// 3 s at most 1 probe a second, plus what was in flight.
		assert.LessOrEqual(t, st.Outage, int64(workers+3+5))
		t.Logf("during the outage the server saw %d requests; %d attempts failed at the client", st.Outage, failed.Load())
	})
}
