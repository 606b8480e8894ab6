package headway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/ratelimitheader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// respWith returns a response of status with the header fields kv (name,
// value, name, value...) and the signal ratelimitheader.Parse reads in it.
func respWith(status int, body string, kv ...string) (*http.Response, ratelimitheader.Signal) {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
	sig := ratelimitheader.Parse(&ratelimitheader.Input{Status: status, Header: h, Body: []byte(body), Now: t0})
	return resp, sig
}

func reqWith(t *testing.T, method string, kv ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, "http://api.test/x", nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header[kv[i]] = []string{kv[i+1]}
	}
	return req
}

var (
	errReset = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errEOF   = fmt.Errorf("http: persistent connection broken: %w", io.ErrUnexpectedEOF)
)

func TestRetryDecisionTable(t *testing.T) {
	const billing = `{"error":{"type":"insufficient_quota","message":"You exceeded your current quota"}}`
	const secondary = `{"message":"You have exceeded a secondary rate limit"}`
	type row struct {
		name     string
		method   string
		hdr      []string // request header, name value...
		status   int      // 0: transport error err
		err      error
		resp     []string // response header
		body     string
		opts     RetryOptions
		attempts int
		noReplay bool
		want     retryStop
		wait     time.Duration // the floor, when the server stated one
	}
	rows := []row{
		// Idempotent methods: every listed status and transport errors.
		{name: "GET 429", method: "GET", status: 429, want: retryGo},
		{name: "GET 502", method: "GET", status: 502, want: retryGo},
		{name: "GET 503", method: "GET", status: 503, want: retryGo},
		{name: "GET 504", method: "GET", status: 504, want: retryGo},
		{name: "GET 500 not listed", method: "GET", status: 500, want: stopStatus},
		{name: "GET 200", method: "GET", status: 200, want: stopStatus},
		{name: "GET 404", method: "GET", status: 404, want: stopStatus},
		{name: "GET plain 403", method: "GET", status: 403, want: stopStatus},
		{name: "HEAD 503", method: "HEAD", status: 503, want: retryGo},
		{name: "OPTIONS 502", method: "OPTIONS", status: 502, want: retryGo},
		{name: "TRACE 504", method: "TRACE", status: 504, want: retryGo},
		{name: "PUT 503", method: "PUT", status: 503, want: retryGo},
		{name: "DELETE 502", method: "DELETE", status: 502, want: retryGo},
		{name: "empty method is GET", method: "", status: 502, want: retryGo},
		{name: "GET reset", method: "GET", err: errReset, want: retryGo},
		{name: "GET EOF", method: "GET", err: errEOF, want: retryGo},
		{name: "PUT EOF", method: "PUT", err: io.EOF, want: retryGo},
		{name: "GET canceled", method: "GET", err: context.Canceled, want: stopError},
		{name: "GET timeout of the transport", method: "GET", err: fmt.Errorf("x: %w", context.DeadlineExceeded), want: retryGo},

		// Non-idempotent methods: only when the server did not act.
		{name: "POST 429", method: "POST", status: 429, want: retryGo},
		{name: "PATCH 429", method: "PATCH", status: 429, want: retryGo},
		{name: "POST 503", method: "POST", status: 503, want: stopMethod},
		{name: "POST 503 Retry-After", method: "POST", status: 503, resp: []string{"Retry-After", "2"}, want: retryGo, wait: 2 * time.Second},
		{name: "POST 502", method: "POST", status: 502, want: stopMethod},
		{name: "POST 504", method: "POST", status: 504, want: stopMethod},
		{name: "POST reset", method: "POST", err: errReset, want: stopMethod},
		{name: "PATCH EOF", method: "PATCH", err: errEOF, want: stopMethod},
		{name: "POST throttling 403", method: "POST", status: 403, body: secondary, want: retryGo, wait: time.Minute},

		// An idempotency key makes any method idempotent.
		{name: "POST key 502", method: "POST", hdr: []string{"Idempotency-Key", "k1"}, status: 502, want: retryGo},
		{name: "POST X-key 503", method: "POST", hdr: []string{"X-Idempotency-Key", "k1"}, status: 503, want: retryGo},
		{name: "PATCH key reset", method: "PATCH", hdr: []string{"Idempotency-Key", "k1"}, err: errReset, want: retryGo},
		{name: "POST empty key", method: "POST", hdr: []string{"Idempotency-Key", ""}, status: 504, want: retryGo},

		// RetryNonIdempotent.
		{name: "POST 502 opt-in", method: "POST", status: 502, opts: RetryOptions{RetryNonIdempotent: true}, want: retryGo},
		{name: "POST reset opt-in", method: "POST", err: errReset, opts: RetryOptions{RetryNonIdempotent: true}, want: retryGo},
		{name: "POST 500 opt-in not listed", method: "POST", status: 500, opts: RetryOptions{RetryNonIdempotent: true}, want: stopStatus},

		// Statuses.
		{name: "GET 500 listed", method: "GET", status: 500, opts: RetryOptions{Statuses: []int{500}}, want: retryGo},
		{name: "GET 429 unlisted", method: "GET", status: 429, opts: RetryOptions{Statuses: []int{503}}, want: stopStatus},
		{name: "throttling 403 unlisted", method: "GET", status: 403, body: secondary, opts: RetryOptions{Statuses: []int{503}}, want: stopStatus},
		{name: "empty list retries no status", method: "GET", status: 503, opts: RetryOptions{Statuses: []int{}}, want: stopStatus},
		{name: "empty list still retries errors", method: "GET", err: errReset, opts: RetryOptions{Statuses: []int{}}, want: retryGo},

		// Signals.
		{name: "429 billing", method: "GET", status: 429, body: billing, want: stopNotRetryable},
		{name: "503 Stripe-Should-Retry false", method: "GET", status: 503, resp: []string{"Stripe-Should-Retry", "false"}, want: stopNotRetryable},
		{name: "429 Retry-After too long", method: "GET", status: 429, resp: []string{"Retry-After", "86400"}, want: stopTooLong},
		{name: "429 Retry-After", method: "GET", status: 429, resp: []string{"Retry-After", "7"}, want: retryGo, wait: 7 * time.Second},
		{name: "503 Retry-After", method: "GET", status: 503, resp: []string{"Retry-After", "1"}, want: retryGo, wait: time.Second},
		{name: "429 reset of an exhausted quota", method: "GET", status: 429,
			resp: []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"}, want: retryGo, wait: 30 * time.Second},

		// Hard stops.
		{name: "attempts spent", method: "GET", status: 503, attempts: 4, want: stopAttempts},
		{name: "attempts spent early", method: "GET", status: 503, attempts: 2, opts: RetryOptions{MaxAttempts: 2}, want: stopAttempts},
		{name: "MaxAttempts 1", method: "GET", status: 503, opts: RetryOptions{MaxAttempts: 1}, want: stopAttempts},
		{name: "body not replayable", method: "PUT", status: 503, noReplay: true, want: stopBody},
		{name: "certificate", method: "GET", err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, want: stopError},
		{name: "hostname", method: "GET", err: fmt.Errorf("x: %w", x509.HostnameError{}), want: stopError},
		{name: "no such host", method: "GET", err: &net.DNSError{Err: "no such host", IsNotFound: true}, want: stopError},
		{name: "DNS timeout", method: "GET", err: &net.DNSError{Err: "timeout", IsTimeout: true}, want: retryGo},
		{name: "queue full", method: "GET", err: ErrQueueFull, want: stopError},
		{name: "circuit open", method: "GET", err: &CircuitOpenError{State: BreakerOpen}, want: stopError},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			p := newRetryPolicy(r.opts)
			in := retryInput{req: reqWith(t, r.method, r.hdr...), attempts: max(r.attempts, 1), replayable: !r.noReplay, err: r.err}
			if r.status != 0 {
				in.resp, in.sig = respWith(r.status, r.body, r.resp...)
			}
			v := p.decide(in)
			assert.Equal(t, r.want, v.stop, "got %v, want %v", v.stop, r.want)
			if v.retry() {
				assert.Equal(t, r.wait, v.wait)
				assert.Equal(t, r.wait != 0, v.hasWait)
			}
		})
	}
}

func TestRetryDecisionContextDone(t *testing.T) {
	p := newRetryPolicy(RetryOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := reqWith(t, "GET").WithContext(ctx)
	for _, in := range []retryInput{
		{req: req, attempts: 1, replayable: true, err: errReset},
		func() retryInput {
			resp, sig := respWith(503, "")
			return retryInput{req: req, attempts: 1, replayable: true, resp: resp, sig: sig}
		}(),
	} {
		assert.Equal(t, stopContext, p.decide(in).stop)
	}
}

func TestRetryCheckHook(t *testing.T) {
	var calls atomic.Int64
	decision := RetryDefault
	p := newRetryPolicy(RetryOptions{CheckRetry: func(req *http.Request, resp *http.Response, err error) RetryDecision {
		calls.Add(1)
		return decision
	}})
	post := reqWith(t, "POST")
	in := func(status int, kv ...string) retryInput {
		resp, sig := respWith(status, "", kv...)
		return retryInput{req: post, attempts: 1, replayable: true, resp: resp, sig: sig}
	}

	decision = Retry
	assert.Equal(t, retryGo, p.decide(in(500)).stop, "Retry overrides status and method")
	assert.Equal(t, retryGo, p.decide(retryInput{req: post, attempts: 1, replayable: true, err: errReset}).stop)
	v := p.decide(in(503, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "3"))
	assert.True(t, v.retry())
	assert.Equal(t, 3*time.Second, v.wait, "a stated wait still applies")
	assert.Equal(t, stopAttempts, p.decide(retryInput{req: post, attempts: 4, replayable: true, err: errReset}).stop, "MaxAttempts still applies")
	assert.Equal(t, stopBody, p.decide(retryInput{req: post, attempts: 1, err: errReset}).stop, "replayability still applies")

	decision = NoRetry
	assert.Equal(t, stopHook, p.decide(in(429)).stop)

	decision = RetryDefault
	assert.Equal(t, retryGo, p.decide(in(429)).stop)
	assert.Equal(t, stopMethod, p.decide(in(503)).stop)
	assert.Equal(t, int64(6), calls.Load(), "not asked when a hard stop applies")

	assert.Equal(t, "retry", Retry.String())
	assert.Equal(t, "no-retry", NoRetry.String())
	assert.Equal(t, "default", RetryDefault.String())
}

func TestRetryPolicyDefaults(t *testing.T) {
	p := newRetryPolicy(RetryOptions{})
	assert.Equal(t, defaultMaxAttempts, p.maxAttempts)
	assert.Equal(t, defaultMaxElapsed, p.maxElapsed)
	assert.Equal(t, defaultInitialInterval, p.initial)
	assert.Equal(t, defaultMaxInterval, p.cap)
	assert.Equal(t, defaultMultiplier, p.multiplier)
	assert.Equal(t, int64(defaultMaxBufferedBody), p.maxBody)
	for _, s := range defaultRetryStatuses() {
		assert.True(t, p.statuses.has(s), "%d", s)
	}
	assert.False(t, p.statuses.has(500))
	assert.False(t, p.statuses.has(0))
	assert.False(t, p.statuses.has(9999))

	p = newRetryPolicy(RetryOptions{MaxElapsed: -1, Multiplier: 0.5, InitialInterval: time.Minute, MaxInterval: time.Second})
	assert.Zero(t, p.maxElapsed)
	assert.Equal(t, 1.0, p.multiplier)
	assert.Equal(t, time.Minute, p.cap, "MaxInterval is at least InitialInterval")
}

// seqRand returns a rand that answers n-1 (the top of the range) when top,
// else 0, and records the ranges it was asked for.
type fixedRand struct {
	top    bool
	ranges []int64
}

func (r *fixedRand) draw(n int64) int64 {
	r.ranges = append(r.ranges, n)
	if r.top {
		return n - 1
	}
	return 0
}

// newTestRetrier returns a retrier for req whose jitter is drawn by rnd.
func newTestRetrier(t *testing.T, o RetryOptions, rnd func(int64) int64, req *http.Request, budget *retryBudget, now time.Time) *retrier {
	t.Helper()
	p := newRetryPolicy(o)
	if rnd != nil {
		p.rand = rnd
	}
	r, err := p.newRetrier(req, budget, now)
	require.NoError(t, err)
	deposit(budget, now)
	return r
}

func TestFullJitterBounds(t *testing.T) {
	src := rand.New(rand.NewPCG(1, 2))
	const n = 5_000
	o := RetryOptions{MaxAttempts: 7, MaxElapsed: -1, InitialInterval: 100 * time.Millisecond, MaxInterval: 1 * time.Second, Multiplier: 2}
	intervals := []time.Duration{100, 200, 400, 800, 1000, 1000}
	sums := make([]float64, len(intervals))
	mins := make([]time.Duration, len(intervals))
	maxs := make([]time.Duration, len(intervals))
	for i := range n {
		r := newTestRetrier(t, o, src.Int64N, mustReq(t, "http://api.test/x"), nil, t0)
		for k, iv := range intervals {
			resp, sig := respWith(503, "")
			d, ok := r.next(resp, nil, sig, t0)
			require.True(t, ok, "retry %d", k+1)
			iv *= time.Millisecond
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.LessOrEqual(t, d, iv, "retry %d", k+1)
			sums[k] += float64(d)
			if i == 0 || d < mins[k] {
				mins[k] = d
			}
			maxs[k] = max(maxs[k], d)
		}
		resp, sig := respWith(503, "")
		_, ok := r.next(resp, nil, sig, t0)
		require.False(t, ok)
		assert.Equal(t, stopAttempts, r.stop)
	}
	for k, iv := range intervals {
		iv *= time.Millisecond
		mean := time.Duration(sums[k] / n)
		// Uniform on [0, iv]: mean iv/2, standard error iv/sqrt(12n) < 0.3%.
		assert.InDelta(t, float64(iv/2), float64(mean), float64(iv)/50, "retry %d mean", k+1)
		assert.Less(t, mins[k], iv/100, "retry %d reaches near zero", k+1)
		assert.Greater(t, maxs[k], iv*99/100, "retry %d reaches near the interval", k+1)
	}
}

func TestFullJitterDrawsFromTheWholeInterval(t *testing.T) {
	for _, top := range []bool{false, true} {
		rnd := &fixedRand{top: top}
		r := newTestRetrier(t, RetryOptions{}, rnd.draw, mustReq(t, "http://api.test/x"), nil, t0)
		resp, sig := respWith(502, "")
		d, ok := r.next(resp, nil, sig, t0)
		require.True(t, ok)
		assert.Equal(t, []int64{int64(defaultInitialInterval) + 1}, rnd.ranges, "uniform over [0, interval]")
		if top {
			assert.Equal(t, defaultInitialInterval, d)
		} else {
			assert.Zero(t, d)
		}
	}
}

func TestServerWaitIsAFloorAndResetsTheBackoff(t *testing.T) {
	rnd := &fixedRand{top: true} // every draw at the top: the interval itself
	o := RetryOptions{MaxAttempts: 10, MaxElapsed: -1, InitialInterval: time.Second, Multiplier: 2, MaxInterval: time.Hour}
	r := newTestRetrier(t, o, rnd.draw, mustReq(t, "http://api.test/x"), nil, t0)
	steps := []struct {
		status int
		kv     []string
		want   time.Duration
	}{
		{503, nil, 1 * time.Second},
		{503, nil, 2 * time.Second},
		{503, nil, 4 * time.Second},
		{429, []string{"Retry-After", "3"}, 3 * time.Second},   // floor; backoff restarts at 1 s (draw 1 s < 3 s)
		{503, nil, 2 * time.Second},                            // the reset backoff's next interval
		{503, nil, 4 * time.Second},                            //
		{503, []string{"Retry-After", "0"}, 1 * time.Second},   // a floor below the draw: the draw wins
		{503, nil, 2 * time.Second},                            //
		{429, []string{"Retry-After", "20"}, 20 * time.Second}, //
	}
	for i, s := range steps {
		resp, sig := respWith(s.status, "", s.kv...)
		d, ok := r.next(resp, nil, sig, t0)
		require.True(t, ok, "step %d", i)
		assert.Equal(t, s.want, d, "step %d", i)
	}
	resp, sig := respWith(503, "")
	_, ok := r.next(resp, nil, sig, t0)
	assert.False(t, ok, "ten attempts sent")
	assert.Equal(t, 10, r.attempts)
}

func TestRetryMaxElapsed(t *testing.T) {
	rnd := &fixedRand{top: true}
	o := RetryOptions{MaxAttempts: 100, MaxElapsed: 10 * time.Second, InitialInterval: time.Second, Multiplier: 2, MaxInterval: time.Hour}
	r := newTestRetrier(t, o, rnd.draw, mustReq(t, "http://api.test/x"), nil, t0)
	now := t0
	var delays []time.Duration
	for {
		resp, sig := respWith(503, "")
		d, ok := r.next(resp, nil, sig, now)
		if !ok {
			break
		}
		delays = append(delays, d)
		now = now.Add(d)
	}
	// 1+2+4 = 7 s; the next retry (8 s) would start at 15 s > 10 s.
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, delays)
	assert.Equal(t, stopElapsed, r.stop)

	// A stated wait beyond MaxElapsed ends the retries at once.
	r = newTestRetrier(t, o, rnd.draw, mustReq(t, "http://api.test/x"), nil, t0)
	resp, sig := respWith(429, "", "Retry-After", "11")
	_, ok := r.next(resp, nil, sig, t0)
	assert.False(t, ok)
	assert.Equal(t, stopElapsed, r.stop)
}

func TestRetryStopsWhenTheDeadlineIsTooClose(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(5*time.Second))
	defer cancel()
	req := mustReq(t, "http://api.test/x").WithContext(ctx)
	r := newTestRetrier(t, RetryOptions{}, nil, req, nil, t0)
	resp, sig := respWith(429, "", "Retry-After", "6")
	_, ok := r.next(resp, nil, sig, t0)
	assert.False(t, ok)
	assert.Equal(t, stopDeadline, r.stop)
}

func TestRetryBudgetEndsRetries(t *testing.T) {
	budget := newRetryBudget(BudgetOptions{Ratio: 0.5, MinPerSecond: -1}, t0)
	// One request in the window earns half a retry: none.
	r := newTestRetrier(t, RetryOptions{}, nil, mustReq(t, "http://api.test/x"), budget, t0)
	_, ok := r.next(nil, errReset, ratelimitheader.Signal{}, t0)
	assert.False(t, ok)
	assert.Equal(t, stopBudget, r.stop)
	err := r.fail(errReset)
	var re *RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts)
	assert.True(t, re.BudgetExhausted)
	assert.ErrorIs(t, err, ErrRetryBudgetExhausted)
	assert.ErrorIs(t, err, syscall.ECONNRESET)
	assert.Contains(t, err.Error(), "budget")

	// A second request makes it one.
	r2 := newTestRetrier(t, RetryOptions{}, nil, mustReq(t, "http://api.test/x"), budget, t0)
	_, ok = r2.next(nil, errReset, ratelimitheader.Signal{}, t0)
	assert.True(t, ok)
	// No budget is spent on a retry that is not made.
	resp, sig := respWith(404, "")
	_, ok = r2.next(resp, nil, sig, t0)
	assert.False(t, ok)
	assert.Equal(t, stopStatus, r2.stop)
}

func TestRetryErrorWrapping(t *testing.T) {
	r := newTestRetrier(t, RetryOptions{}, nil, mustReq(t, "http://api.test/x"), nil, t0)
	assert.Same(t, ErrQueueFull, r.fail(ErrQueueFull), "no attempt sent: the error as it is")

	timeout := &net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}
	for range 4 {
		_, _ = r.next(nil, timeout, ratelimitheader.Signal{}, t0)
	}
	err := r.fail(timeout)
	var re *RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 4, re.Attempts)
	assert.False(t, re.BudgetExhausted)
	assert.NotErrorIs(t, err, ErrRetryBudgetExhausted)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.True(t, re.Timeout())
	assert.Equal(t, "headway: 4 attempts: "+timeout.Error(), err.Error())
	assert.False(t, (&RetryError{Attempts: 1, Err: errReset}).Timeout())
	assert.Equal(t, "headway: 1 attempt: "+errReset.Error(), (&RetryError{Attempts: 1, Err: errReset}).Error())
}

// sizedBody is a response body that counts what was read of it and its
// closes.
type sizedBody struct {
	io.Reader
	read   atomic.Int64
	closes atomic.Int64
}

func (b *sizedBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *sizedBody) Close() error { b.closes.Add(1); return nil }

// step is one answer of a stepRT: a status with header fields, or an
// error.
type step struct {
	status int
	kv     []string
	err    error
}

// stepRT answers with its steps in turn (the last one for ever after),
// and records each request body it got and when.
type stepRT struct {
	mu     sync.Mutex
	steps  []step
	n      int
	bodies []string
	sent   []time.Time
	resps  []*sizedBody
}

func (s *stepRT) RoundTrip(req *http.Request) (*http.Response, error) {
	var body string
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		body = string(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.steps[min(s.n, len(s.steps)-1)]
	s.n++
	s.bodies = append(s.bodies, body)
	s.sent = append(s.sent, time.Now())
	if st.err != nil {
		return nil, st.err
	}
	h := http.Header{}
	for i := 0; i+1 < len(st.kv); i += 2 {
		h.Add(st.kv[i], st.kv[i+1])
	}
	rb := &sizedBody{Reader: strings.NewReader(fmt.Sprintf("answer %d", s.n))}
	s.resps = append(s.resps, rb)
	return &http.Response{StatusCode: st.status, Header: h, Body: rb, Request: req}, nil
}

// retryTransport returns a Transport over base that retries with o and has
// no outage state (ProbeInterval -1): every retry backs off on its own, so
// these tests see the retry policy alone. rnd, when set, draws the jitter.
func retryTransport(base http.RoundTripper, o RetryOptions, rnd func(int64) int64, opts ...Option) *Transport {
	o.ProbeInterval = -1
	tr := New(base, append([]Option{WithRetry(o)}, opts...)...)
	if rnd != nil {
		tr.retry.rand = rnd
	}
	return tr
}

func TestRetryLoopReturnsTheLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 503}, {err: errReset}, {status: 502}, {status: 503, kv: []string{"Retry-After", "9"}}}}
		// A key with configured limits goes back to them after a rare
		// throttle (a bare 429 or 503 slows only a key without limits): the
		// waits between attempts are the backoff's alone.
		tr := retryTransport(base, RetryOptions{}, nil, WithLimit(PerSecond(100).WithBurst(10)))
		req, body := newUnknownLenReq(t, "the payload")
		req.Method = http.MethodPut
		before := snap(req)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "the last response, not an error")
		assert.Equal(t, "9", resp.Header.Get("Retry-After"))
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, "answer 4", string(b), "its body intact")
		resp.Body.Close()

		assert.Equal(t, []string{"the payload", "the payload", "the payload", "the payload"}, base.bodies)
		assert.Equal(t, int64(1), body.closes.Load())
		assert.Equal(t, before, snap(req))
		for i, rb := range base.resps[:len(base.resps)-1] {
			assert.Equal(t, int64(1), rb.closes.Load(), "discarded response %d closed", i)
		}
		// Three waits of full jitter: at most 0.5 + 1 + 2 s.
		assert.LessOrEqual(t, time.Since(start), 3500*time.Millisecond)
		for i := 1; i < len(base.sent); i++ {
			assert.LessOrEqual(t, base.sent[i].Sub(base.sent[i-1]), defaultInitialInterval<<(i-1))
		}
	})
}

func TestRetryLoopTransportErrorComesBackWrapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{err: errReset}}}
		resp, err := retryTransport(base, RetryOptions{MaxAttempts: 3}, nil).RoundTrip(mustReq(t, "http://api.test/x"))
		assert.Nil(t, resp)
		var re *RetryError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 3, re.Attempts)
		assert.ErrorIs(t, err, syscall.ECONNRESET)
		assert.Len(t, base.sent, 3)
	})
}

func TestRetryLoopHonoursTheServersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 429, kv: []string{"Retry-After", "5"}}, {status: 200}}}
		req, body := newBodyReq(t, "http://api.test/x") // a POST: 429 is retried
		start := time.Now()
		resp, err := retryTransport(base, RetryOptions{}, nil).RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, 5*time.Second, time.Since(start), "the stated wait, to the nanosecond: the backoff draw is below it")
		assert.Equal(t, []string{"payload", "payload"}, base.bodies)
		assert.Equal(t, int64(1), body.closes.Load())
	})
}

func TestRetryLoopOverLimitBodyIsSentOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 503}}}
		payload := strings.Repeat("z", 100)
		req, body := newUnknownLenReq(t, payload)
		req.Method = http.MethodPut
		resp, err := retryTransport(base, RetryOptions{MaxBufferedBody: 10}, nil).RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, []string{payload}, base.bodies)
		assert.Equal(t, int64(1), body.closes.Load())
	})
}

func TestRetryLoopPostIsNotRetriedOnA502(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 502}, {status: 200}}}
		req, body := newBodyReq(t, "http://api.test/x")
		resp, err := retryTransport(base, RetryOptions{}, nil).RoundTrip(req)
		require.NoError(t, err)
		drain(resp)
		assert.Equal(t, 502, resp.StatusCode)
		assert.Len(t, base.sent, 1)
		assert.Equal(t, int64(1), body.closes.Load())
	})
}

func TestRetryLoopCancelledWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 503, kv: []string{"Retry-After", "60"}}}}
		ctx, cancel := context.WithCancel(context.Background())
		req, body := newBodyReq(t, "http://api.test/x")
		req.Method = http.MethodPut
		req = req.WithContext(ctx)
		time.AfterFunc(time.Second, cancel)
		resp, err := retryTransport(base, RetryOptions{}, nil).RoundTrip(req)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, int64(1), body.closes.Load())
		assert.Equal(t, int64(1), base.resps[0].closes.Load())
	})
}

func TestRetryLoopBufferReadErrorFailsUnsent(t *testing.T) {
	base := &stepRT{steps: []step{{status: 200}}}
	req, body := newUnknownLenReq(t, "abc")
	body.err = errors.New("disk on fire")
	_, err := retryTransport(base, RetryOptions{}, nil).RoundTrip(req)
	assert.ErrorIs(t, err, body.err)
	assert.Empty(t, base.sent)
	assert.Equal(t, int64(1), body.closes.Load())
}

// BenchmarkRetrierFirstAttemptSucceeds measures what retries cost a request
// that needs none: the retrier, one clone, one decision.
func BenchmarkRetrierFirstAttemptSucceeds(b *testing.B) {
	p := newRetryPolicy(RetryOptions{})
	budget := newRetryBudget(BudgetOptions{}, t0)
	req, err := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
	require.NoError(b, err)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}}
	sig := ratelimitheader.Signal{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := p.newRetrier(req, budget, t0)
			deposit(budget, t0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.attempt(); err != nil {
				b.Fatal(err)
			}
			if _, again := r.next(resp, nil, sig, t0); again {
				b.Fatal("retried a 200")
			}
			r.close()
		}
	})
}

// TestAHeldProbeSpendsNoAttemptNorBudget: a failed probe of a key in hold
// mode is retried without spending an attempt or the budget, while the
// attempts that were not probes are counted; the RetryError counts every
// attempt sent.
func TestAHeldProbeSpendsNoAttemptNorBudget(t *testing.T) {
	budget := newRetryBudget(BudgetOptions{Ratio: 0.5, MinPerSecond: -1}, t0)
	deposit(budget, t0) // two requests: one retry
	r := newTestRetrier(t, RetryOptions{MaxAttempts: 2}, nil, mustReq(t, "http://api.test/x"), budget, t0)
	r.held = true
	_, ok := r.next(nil, errReset, ratelimitheader.Signal{}, t0) // the failure that began the outage
	require.True(t, ok)
	r.heldProbe = true
	for i := range 100 {
		_, ok := r.next(nil, errReset, ratelimitheader.Signal{}, t0)
		require.True(t, ok, "probe %d", i)
	}
	r.held, r.heldProbe = false, false
	_, ok = r.next(nil, errReset, ratelimitheader.Signal{}, t0) // a failure as no probe
	assert.False(t, ok)
	assert.Equal(t, stopAttempts, r.stop)
	var re *RetryError
	require.ErrorAs(t, r.fail(errReset), &re)
	assert.Equal(t, 102, re.Attempts)
	assert.False(t, budget.withdraw(t0), "the one retry the budget had went to the first failure")

	// With retries off, a probe is not retried.
	r = newTestRetrier(t, RetryOptions{MaxAttempts: 1}, nil, mustReq(t, "http://api.test/x"), nil, t0)
	r.held, r.heldProbe = true, true
	_, ok = r.next(nil, errReset, ratelimitheader.Signal{}, t0)
	assert.False(t, ok)
	assert.Equal(t, stopAttempts, r.stop)
}
