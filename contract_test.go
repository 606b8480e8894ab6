package headway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request whose context is already done is not sent and spends nothing
// of its key's limits: it fails at once with its context's error and its
// body closed. Before, one that found a free slot was handed to the base
// (which net/http fails at once) and spent a slot of the key's limits, so
// that the next request waited for one that was never used.
func TestARequestWhoseContextIsDoneIsNotSent(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline past", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stub := &stubRT{}
				tr := New(stub, WithLimit(PerSecond(1)))
				ctx, cancel := c.ctx()
				defer cancel()
				req, body := newBodyReq(t, "http://api.test/")
				resp, err := tr.RoundTrip(req.WithContext(ctx))
				assert.Nil(t, resp)
				assert.ErrorIs(t, err, c.want)
				assert.Equal(t, int64(1), body.closes.Load())
				assert.Zero(t, stub.count(), "not sent")

				start := time.Now()
				resp, err = tr.RoundTrip(mustReq(t, "http://api.test/"))
				require.NoError(t, err)
				drain(resp)
				assert.Zero(t, time.Since(start), "the key's slot was not spent")
			})
		})
	}
}

// nilBodyRT answers 503 then 200, as a base that breaks the RoundTripper
// contract: its responses have no Body.
type nilBodyRT struct{ n atomic.Int64 }

func (r *nilBodyRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	status := http.StatusOK
	if r.n.Add(1) == 1 {
		status = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Request: req}, nil
}

// A response without a Body, from a base that breaks the RoundTripper
// contract, is retried like any other (http.Client reads such a body as
// empty). Before, the retry panicked closing the kept response's nil Body.
func TestAResponseWithoutABodyIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &nilBodyRT{}
		resp, err := New(base).RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, int64(2), base.n.Load())
	})
}

// The kept response without a Body goes back, readable, when its retry
// cannot start in time.
func TestAKeptResponseWithoutABodyIsTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &nilBodyRT{}
		tr := New(base, WithQueue(QueueOptions{MaxWait: time.Millisecond}), WithMaxInFlight(1))
		// The 503 holds the key for a probe that MaxWait cannot wait for.
		resp, err := tr.RoundTrip(mustReq(t, "http://api.test/"))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		t.Logf("status %d after %d sent", resp.StatusCode, base.n.Load())
		assert.Empty(t, b)
	})
}

// A request without a URL fails with an error, its body closed, as
// net/http's Transport fails it. Before, RoundTrip panicked.
func TestARequestWithoutAURLFails(t *testing.T) {
	stub := &stubRT{}
	body := &closeCounter{}
	resp, err := New(stub).RoundTrip(&http.Request{Method: http.MethodPost, Header: http.Header{}, Body: body})
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, errNilURL)
	assert.Equal(t, int64(1), body.closes.Load())
	assert.Zero(t, stub.count())
}

// bigBodyRT answers 503 with a body larger than a kept response may be,
// then 200, one request at a time, and keeps the last body.
type bigBodyRT struct {
	n    atomic.Int64
	body *closeCounter
}

func (r *bigBodyRT) RoundTrip(req *http.Request) (*http.Response, error) {
	status := http.StatusOK
	if r.n.Add(1) == 1 {
		status = http.StatusServiceUnavailable
	}
	r.body = &closeCounter{Reader: strings.NewReader(strings.Repeat("x", maxBufferedThrottle+1))}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: r.body, Request: req}, nil
}

// A response too large to keep while its retry waits goes back to the
// caller, whole, as maxBufferedThrottle says. Before, it was drained and
// dropped, and a retry that could not be sent in time (here: the host is
// down and its probe comes after the deadline) failed the request with a
// *RetryError though it got a response; a small one came back as the
// answer.
func TestAResponseTooLargeToKeepIsTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &bigBodyRT{}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		require.NoError(t, err)
		resp, err := New(base, WithMaxInFlight(1)).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Len(t, b, maxBufferedThrottle+1, "whole")
		resp.Body.Close()
		assert.Equal(t, int64(1), base.n.Load(), "not retried")
		assert.Equal(t, int64(1), base.body.closes.Load())
	})
}

// A nil option is ignored, as an option chosen at run time may be: New
// panicked on it.
func TestANilOptionIsIgnored(t *testing.T) {
	var maybe Option // none chosen
	stub := &stubRT{}
	var tr *Transport
	require.NotPanics(t, func() { tr = New(stub, maybe, WithLimit(PerSecond(10)), nil) })
	req, err := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, stub.count())
}

// retriesLeft spends what is left of the retry budget of tr's key for
// url, and returns how many retries that was.
func retriesLeft(t *testing.T, tr *Transport, url string) int {
	req := mustReq(t, url)
	return spend(tr.keys.get(tr.cfg.keyFunc(req), tr, req).retryBudget(), time.Now())
}

// A retry withdrawn from its key's budget that is not sent after all is
// given back: a retry that never reached the server does not count
// against the budget, and the key's next failures may still be retried.
// Before, it stayed spent, on each of these paths.
func TestARetryNotSentSpendsNoBudget(t *testing.T) {
	// A floor of 10 retries per 10 s window; one request adds none (0.2).
	budget := BudgetOptions{MinPerSecond: 1}
	const floor = 10
	const url = "http://api.test/x"
	top := func(n int64) int64 { return n - 1 } // the backoff's longest wait
	for _, c := range []struct {
		name string
		// run sends one request whose retry is allowed but not sent, and
		// returns the Transport and how many attempts reached the base.
		run func(t *testing.T) (*Transport, int)
	}{
		{"its response too large to keep", func(t *testing.T) (*Transport, int) {
			base := &bigBodyRT{}
			tr := New(base, WithRetry(RetryOptions{Budget: budget}))
			resp, err := tr.RoundTrip(mustReq(t, url))
			require.NoError(t, err)
			drain(resp)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			return tr, int(base.n.Load())
		}},
		{"its attempt opened the breaker", func(t *testing.T) (*Transport, int) {
			base := &stepRT{steps: []step{{status: 503}}}
			tr := retryTransport(base, RetryOptions{Budget: budget}, nil,
				WithBreaker(BreakerSettings{ConsecutiveFailures: 1}))
			resp, err := tr.RoundTrip(mustReq(t, url))
			require.NoError(t, err)
			drain(resp)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			return tr, len(base.sent)
		}},
		{"cancelled during its backoff", func(t *testing.T) (*Transport, int) {
			base := &stepRT{steps: []step{{err: errReset}}}
			tr := retryTransport(base, RetryOptions{Budget: budget}, top)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(100*time.Millisecond, cancel)
			_, err := tr.RoundTrip(mustReq(t, url).WithContext(ctx))
			assert.ErrorIs(t, err, context.Canceled)
			return tr, len(base.sent)
		}},
		{"cancelled waiting for its key's pause", func(t *testing.T) (*Transport, int) {
			base := &stepRT{steps: []step{{status: 429, kv: []string{"Retry-After", "60"}}}}
			tr := New(base, WithRetry(RetryOptions{Budget: budget}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(time.Second, cancel)
			_, err := tr.RoundTrip(mustReq(t, url).WithContext(ctx))
			assert.ErrorIs(t, err, context.Canceled)
			return tr, len(base.sent)
		}},
		{"refused by its key's queue", func(t *testing.T) (*Transport, int) {
			base := &stepRT{steps: []step{{status: 429, kv: []string{"Retry-After", "5"}}}}
			tr := New(base, WithRetry(RetryOptions{Budget: budget}),
				WithQueue(QueueOptions{MaxWait: time.Second}))
			resp, err := tr.RoundTrip(mustReq(t, url))
			require.NoError(t, err)
			drain(resp)
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			return tr, len(base.sent)
		}},
		{"its body not to be had again", func(t *testing.T) (*Transport, int) {
			base := &stepRT{steps: []step{{status: 503}}}
			tr := retryTransport(base, RetryOptions{Budget: budget}, nil)
			req, body := newBodyReq(t, url)
			req.Method = http.MethodPut
			req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			drain(resp)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, int64(1), body.closes.Load())
			return tr, len(base.sent)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr, sent := c.run(t)
				assert.Equal(t, 1, sent, "not retried")
				assert.Equal(t, floor, retriesLeft(t, tr, url), "the budget is whole")
			})
		})
	}

	// A retry that is sent stays spent.
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 503}, {status: 200}}}
		tr := retryTransport(base, RetryOptions{Budget: budget}, nil)
		resp, err := tr.RoundTrip(mustReq(t, url))
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, floor-1, retriesLeft(t, tr, url))
	})
}

// A request that its key admitted and that is not sent after all gives
// back the slot of the key's limits it took, as one whose context ends as
// it is admitted does (abandon): the next request does not wait for a slot
// that nobody used. Before, it stayed spent.
func TestAnAdmittedRequestNotSentGivesItsSlotBack(t *testing.T) {
	const url = "http://api.test/x"
	for _, c := range []struct {
		name string
		// run sends one request that is admitted and not sent, through a
		// key that allows one a second, and returns the Transport.
		run func(t *testing.T) *Transport
	}{
		{"its body not to be read", func(t *testing.T) *Transport {
			tr := New(&stubRT{}, WithLimit(Every(time.Second)))
			req, body := newUnknownLenReq(t, "abc")
			body.err = errors.New("disk on fire")
			_, err := tr.RoundTrip(req)
			assert.ErrorIs(t, err, body.err)
			return tr
		}},
		{"its retry's body not to be had again", func(t *testing.T) *Transport {
			base := &stepRT{steps: []step{{status: 503}, {status: 200}}}
			tr := retryTransport(base, RetryOptions{}, nil, WithLimit(Every(time.Second)))
			req, _ := newBodyReq(t, url)
			req.Method = http.MethodPut
			req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
			resp, err := tr.RoundTrip(req) // the retry is admitted 1 s later
			require.NoError(t, err)
			drain(resp)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Len(t, base.sent, 1)
			return tr
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := c.run(t)
				start := time.Now()
				resp, err := tr.RoundTrip(mustReq(t, url))
				require.NoError(t, err)
				drain(resp)
				assert.Zero(t, time.Since(start), "the slot was given back")
			})
		})
	}
}
