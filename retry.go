package headway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/headway-go/headway/ratelimitheader"
)

// RetryOptions configures the retries of requests that failed in a way
// that passes with time: a throttle (429), an overload or outage (502,
// 503, 504) or a broken connection. The zero value means the defaults.
//
// Which requests are retried:
//
//   - A request whose context is done is never retried.
//   - A request whose body cannot be sent again is never retried: one with
//     a body, no GetBody and more than MaxBufferedBody bytes.
//   - CheckRetry, when set, is asked next; Retry or NoRetry settles it.
//   - A response whose status is not in Statuses is not retried. A 403 that
//     the response's signal marks as a rate limit (GitHub's secondary
//     limits) counts as a 429.
//   - A rejection that waiting does not cure (ratelimitheader.Signal.Permanent, such
//     as a billing quota) is not retried, nor one whose stated wait is too
//     long to sleep on (ratelimitheader.Signal.OverMaxServerWait): the response goes back at once.
//   - An idempotent request is retried on every status in Statuses and on
//     transport errors (a reset connection, an unexpected EOF, a timeout;
//     not a context's end, nor a certificate or DNS "no such host" error).
//     GET, HEAD, OPTIONS, TRACE, PUT and DELETE are idempotent, and so is
//     any request with an Idempotency-Key or X-Idempotency-Key header (as
//     net/http itself holds).
//   - Any other request (POST, PATCH) is retried only when the server
//     cannot have acted on it: on a 429 (or a throttling 403), and on a 503
//     or 529 with a stated delay (Retry-After or the like), an explicit
//     "come back later". RetryNonIdempotent retries it like an idempotent
//     one.
//
// While a key's host is down (see "Outages" in the package documentation),
// a retry of a request that met the outage waits at the front of the key's
// queue instead of backing off on its own: the key's probes say when it
// goes, and it adds no probe. It waits no longer than MaxElapsed allows: a
// held retry that could not start within it fails at once (see
// RetryError and WaitError). When it goes as the key's probe and fails,
// that spends one of its attempts, unless the key's breaker is in hold
// mode (BreakerSettings.Hold): then a failed probe spends neither an
// attempt nor the budget, and the request waits for the host for as long
// as its deadline, MaxElapsed and QueueOptions.MaxWait allow.
//
// When the response states a wait (ratelimitheader.Signal.HasWait), the retry waits at
// least that long, and the backoff starts over from InitialInterval: the
// server said how long, our own guess is reset. Otherwise the retry waits
// a random time between zero and the current backoff interval ("full
// jitter"), which grows from InitialInterval by Multiplier up to
// MaxInterval.
//
// Retries end after MaxAttempts attempts, when the next one could not
// start within MaxElapsed of the first or before the request's context
// deadline, or when the key's retry budget is spent. The caller then gets
// the last response, even a 429 or a 503, or, when the last attempt got no
// response, a *RetryError.
type RetryOptions struct {
	// MaxAttempts is the most times a request is sent, the first one
	// included; in hold mode a failed probe is not counted (see
	// BreakerSettings.Hold). Zero or a negative value means the default,
	// 4; 1 disables retries, of probes too.
	MaxAttempts int

	// MaxElapsed bounds the time from the first attempt to the start of the
	// last: a retry that could not start within it is not made, and a
	// retry waiting for its key's probes fails at once when the next one
	// comes too late. The default is 2 minutes; a negative value means no
	// bound. It is what ends a request held through an outage in hold mode
	// (BreakerSettings.Hold), with its deadline and QueueOptions.MaxWait.
	MaxElapsed time.Duration

	// Statuses are the response statuses that may be retried, subject to
	// the request's method (see RetryOptions). Nil means 429, 502, 503, 504
	// and 529 (an overload, as Anthropic and Notion answer it). Other
	// statuses can be retried with CheckRetry.
	Statuses []int

	// CheckRetry, when set, decides first whether an attempt is retried:
	// Retry or NoRetry override the built-in rules, RetryDefault defers to
	// them. MaxAttempts, MaxElapsed, the deadline, the budget and the body's
	// replayability still apply, and a stated wait is still honoured.
	//
	// req is the caller's request; resp is nil when err is not. CheckRetry
	// must not modify them, nor read or close resp.Body, which goes back to
	// the caller unless the attempt is retried. It may be called
	// concurrently, for different requests.
	CheckRetry func(req *http.Request, resp *http.Response, err error) RetryDecision

	// InitialInterval is the first backoff interval. The default is 500ms.
	InitialInterval time.Duration
	// MaxInterval caps the backoff interval. The default is 30 seconds.
	MaxInterval time.Duration
	// Multiplier is the factor by which the interval grows after each
	// retry. The default is 2; values below 1 count as 1.
	Multiplier float64

	// MaxBufferedBody is the largest request body held in memory to be
	// sent again, for a body that has no GetBody. A larger body is sent once
	// and never retried. The default is 1 MiB; a negative value never
	// buffers. Reading to find the size blocks until that many bytes or EOF
	// come: a body written only after the response arrives (full-duplex
	// streaming) needs GetBody, a negative MaxBufferedBody, or MaxAttempts 1.
	MaxBufferedBody int64

	// RetryNonIdempotent retries requests that are not idempotent (POST,
	// PATCH without an Idempotency-Key) on every status in Statuses and on
	// transport errors, as if they were. Set it only when the server
	// tolerates duplicates.
	RetryNonIdempotent bool

	// Budget bounds the retries of each key to a share of its requests.
	Budget BudgetOptions

	// ProbeInterval is the wait, after a failure that shows a key's host is
	// down, before the key sends its first probe; the wait, from each
	// failed probe, doubles up to MaxProbeInterval (not jittered: one probe
	// is in flight at a time). See "Outages" in the package documentation.
	// The default is 200ms; a negative value turns the outage state off:
	// every request then backs off on its own, as the other retries do.
	ProbeInterval time.Duration
	// MaxProbeInterval caps the wait between two probes: it is the longest
	// a host that comes back waits for the probe that finds it. The default
	// is 500ms (0.25 s on average), for the price of two requests a second
	// while the host is down. Halving it halves both waits and doubles the
	// price.
	MaxProbeInterval time.Duration
}

// Defaults of RetryOptions, documented on its fields.
const (
	defaultMaxAttempts     = 4
	defaultMaxElapsed      = 2 * time.Minute
	defaultInitialInterval = 500 * time.Millisecond
	defaultMaxInterval     = 30 * time.Second
	defaultMultiplier      = 2.0
	defaultMaxBufferedBody = 1 << 20
)

// defaultRetryStatuses returns the statuses retried when
// RetryOptions.Statuses is nil.
func defaultRetryStatuses() []int {
	return []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, statusOverloaded}
}

// A RetryDecision is RetryOptions.CheckRetry's verdict on an attempt.
type RetryDecision uint8

const (
	// RetryDefault leaves the decision to the built-in rules.
	RetryDefault RetryDecision = iota
	// Retry retries the request, within MaxAttempts, MaxElapsed, the
	// request's deadline and the retry budget, if its body can be sent
	// again.
	Retry
	// NoRetry hands the response or error back to the caller.
	NoRetry
)

// String returns "default", "retry" or "no-retry".
func (d RetryDecision) String() string {
	switch d {
	case Retry:
		return "retry"
	case NoRetry:
		return "no-retry"
	}
	return "default"
}

// retryPolicy is RetryOptions with the defaults filled in, shared by every
// request of a Transport. It is read-only once made.
type retryPolicy struct {
	maxAttempts   int
	maxElapsed    time.Duration // 0: no bound
	statuses      statusSet
	check         func(*http.Request, *http.Response, error) RetryDecision
	initial, cap  time.Duration
	multiplier    float64
	maxBody       int64 // negative: never buffer
	nonIdempotent bool
	rand          func(n int64) int64 // uniform in [0, n)
}

// newRetryPolicy fills in o's defaults.
func newRetryPolicy(o RetryOptions) *retryPolicy {
	p := &retryPolicy{
		maxAttempts:   o.MaxAttempts,
		maxElapsed:    o.MaxElapsed,
		check:         o.CheckRetry,
		initial:       o.InitialInterval,
		cap:           o.MaxInterval,
		multiplier:    o.Multiplier,
		maxBody:       o.MaxBufferedBody,
		nonIdempotent: o.RetryNonIdempotent,
		rand:          rand.Int64N,
	}
	if p.maxAttempts <= 0 {
		p.maxAttempts = defaultMaxAttempts
	}
	switch {
	case p.maxElapsed == 0:
		p.maxElapsed = defaultMaxElapsed
	case p.maxElapsed < 0:
		p.maxElapsed = 0
	}
	statuses := o.Statuses
	if statuses == nil {
		statuses = defaultRetryStatuses()
	}
	for _, s := range statuses {
		p.statuses.add(s)
	}
	if p.initial <= 0 {
		p.initial = defaultInitialInterval
	}
	if p.cap <= 0 {
		p.cap = defaultMaxInterval
	}
	p.cap = max(p.cap, p.initial)
	switch {
	case p.multiplier == 0:
		p.multiplier = defaultMultiplier
	case p.multiplier < 1:
		p.multiplier = 1
	}
	if p.maxBody == 0 {
		p.maxBody = defaultMaxBufferedBody
	}
	return p
}

// statusSet is a set of HTTP statuses from 100 to 599.
type statusSet [600/64 + 1]uint64

func (s *statusSet) add(code int) {
	if code >= 100 && code < 600 {
		s[code/64] |= 1 << (code % 64)
	}
}

func (s *statusSet) has(code int) bool {
	return code >= 100 && code < 600 && s[code/64]&(1<<(code%64)) != 0
}

// retryStop says why an attempt was or was not retried.
type retryStop uint8

const (
	retryGo          retryStop = iota // retried
	stopContext                       // the request's context is done
	stopAttempts                      // MaxAttempts spent
	stopBody                          // the body cannot be sent again
	stopHook                          // CheckRetry said NoRetry
	stopError                         // a transport error not worth retrying
	stopStatus                        // a status not in Statuses
	stopNotRetryable                  // a rejection that waiting does not cure
	stopTooLong                       // a stated wait too long to sleep on
	stopMethod                        // not idempotent, and maybe processed
	stopElapsed                       // the retry could not start within MaxElapsed
	stopDeadline                      // the retry could not start before the deadline
	stopBudget                        // the key's retry budget is spent
)

var retryStopNames = [...]string{
	retryGo: "retry", stopContext: "context done", stopAttempts: "attempts spent",
	stopBody: "body not replayable", stopHook: "CheckRetry", stopError: "error not retryable",
	stopStatus: "status not retryable", stopNotRetryable: "rejection not retryable",
	stopTooLong: "stated wait too long", stopMethod: "method not idempotent",
	stopElapsed: "MaxElapsed", stopDeadline: "deadline", stopBudget: "budget spent",
}

func (s retryStop) String() string { return retryStopNames[s] }

// retryInput is what the retry decision of one attempt looks at.
type retryInput struct {
	req        *http.Request  // the caller's request
	attempts   int            // attempts spent so far, this one included (see retrier.heldProbe)
	replayable bool           // another attempt can send the same body
	resp       *http.Response // nil when err is not
	err        error
	sig        ratelimitheader.Signal // ratelimitheader.Parse's reading of resp; ignored without resp
}

// retryVerdict is the retry decision of one attempt: whether to retry,
// why, and the server's wait, a floor for the delay before the retry.
type retryVerdict struct {
	stop    retryStop // retryGo to retry
	wait    time.Duration
	hasWait bool // wait was stated by the server: reset the backoff
}

func (v retryVerdict) retry() bool { return v.stop == retryGo }

// decide is the retry decision of one attempt, a pure function of in and
// the policy (and of CheckRetry, when set). It does not look at time: the
// retrier bounds the delay by MaxElapsed and the deadline, and asks the
// budget last.
func (p *retryPolicy) decide(in retryInput) retryVerdict {
	if in.req.Context().Err() != nil {
		return retryVerdict{stop: stopContext}
	}
	if in.attempts >= p.maxAttempts {
		return retryVerdict{stop: stopAttempts}
	}
	if !in.replayable {
		return retryVerdict{stop: stopBody}
	}
	var v retryVerdict
	if in.resp != nil && in.sig.HasWait {
		v.wait, v.hasWait = in.sig.Wait, true
	}
	if p.check != nil {
		switch p.check(in.req, in.resp, in.err) {
		case Retry:
			return v
		case NoRetry:
			return retryVerdict{stop: stopHook}
		}
	}
	idempotent := p.nonIdempotent || isIdempotent(in.req)
	if in.resp == nil {
		switch {
		case !retryableError(in.err):
			v.stop = stopError
		case !idempotent:
			v.stop = stopMethod
		}
		return v
	}
	status := in.resp.StatusCode
	throttled := status == http.StatusTooManyRequests ||
		(status == http.StatusForbidden && in.sig.Throttled)
	switch {
	case throttled && !p.statuses.has(http.StatusTooManyRequests),
		!throttled && !p.statuses.has(status):
		v.stop = stopStatus
	case in.sig.Permanent:
		v.stop = stopNotRetryable
	case in.sig.OverMaxServerWait:
		v.stop = stopTooLong
	case idempotent || throttled:
	case (status == http.StatusServiceUnavailable || status == statusOverloaded) && in.sig.RetryAfter:
	default:
		v.stop = stopMethod
	}
	return v
}

// isIdempotent reports whether req may be sent twice with the same effect
// as once: its method is idempotent, or it carries an idempotency key
// (present in the header map, even with no value, as net/http holds).
func isIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	_, ok := req.Header["X-Idempotency-Key"]
	return ok
}

// retryableError reports whether a transport error may pass with time: a
// broken or refused connection, an unexpected EOF, a timeout. A
// cancellation is the caller's doing, a certificate or an unknown host will
// not change, and headway's own refusals are final.
//
// A context.DeadlineExceeded is a timeout of the transport, such as
// net/http's ResponseHeaderTimeout, whose error matches it: the callers
// ask first whether the request's own context ended.
func retryableError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) ||
		errors.Is(err, ErrQueueFull) || errors.Is(err, ErrCostTooLarge) ||
		errors.Is(err, ErrInvalidCost) || errors.Is(err, ErrCircuitOpen) ||
		errors.Is(err, errNotReplayable) {
		return false
	}
	var (
		certErr     *tls.CertificateVerificationError
		authErr     x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		dnsErr      *net.DNSError
		recordError tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &authErr), errors.As(err, &hostErr),
		errors.As(err, &invalidErr), errors.As(err, &recordError):
		return false
	case errors.As(err, &dnsErr):
		return !dnsErr.IsNotFound
	}
	return true
}

// retrier carries the retries of one RoundTrip: its attempts' requests,
// their count, the backoff and the key's budget. It is not safe for
// concurrent use; one RoundTrip uses it at a time.
type retrier struct {
	p      *retryPolicy
	req    *http.Request
	rp     *replayer
	budget *retryBudget

	exp   *backoff.ExponentialBackOff // reset when the server states a wait
	bo    backoff.BackOff             // exp with full jitter, at most maxAttempts-1 times
	clock clockAt

	start    time.Time
	attempts int
	stop     retryStop
	held     bool // the next retry waits in the key's queue for its probe: no backoff of its own
	// heldProbe: the attempt that ended was a probe of a key held in hold
	// mode (BreakerSettings.Hold), and it failed: it spends neither an
	// attempt nor the budget. probes counts such attempts.
	heldProbe bool
	probes    int
	// owed is the budget that next withdrew the coming retry from, at
	// owedAt, until that retry's attempt is handed out: a retry that is
	// not made after all (see refund) gives it back.
	owed   *retryBudget
	owedAt time.Time
}

// newRetrier starts the retries of req at now: it prepares the body for
// replay (reading it into memory if it must, see replayer). The caller
// deposits the request in the budget (which may be nil). When the body cannot be read it is
// closed and the error returned: the request must fail with it, unsent.
func (p *retryPolicy) newRetrier(req *http.Request, budget *retryBudget, now time.Time) (*retrier, error) {
	limit := p.maxBody
	if p.maxAttempts == 1 {
		limit = -1 // never replayed: no need to buffer
	}
	rp, err := newReplayer(req, limit)
	if err != nil {
		return nil, err
	}
	return &retrier{p: p, req: req, rp: rp, budget: budget, start: now, clock: clockAt{now}}, nil
}

// initBackoff makes the request's backoff, at its first retry: a request
// that needs none does not pay for it.
func (r *retrier) initBackoff() {
	r.exp = backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(r.p.initial),
		backoff.WithMaxInterval(r.p.cap),
		backoff.WithMultiplier(r.p.multiplier),
		backoff.WithRandomizationFactor(0), // full jitter is drawn by fullJitter
		backoff.WithMaxElapsedTime(0),      // bounded by the retrier: Reset would restart it
		backoff.WithClockProvider(&r.clock),
	)
	r.bo = backoff.WithMaxRetries(&fullJitter{b: r.exp, rand: r.p.rand}, uint64(r.p.maxAttempts-1))
}

// attempt returns the request of the next attempt: a clone of the caller's
// request with a fresh body. It must be sent (the base RoundTripper closes
// its body) or have its body closed. A retry that gets its attempt is
// made: what it withdrew from the budget stays spent.
func (r *retrier) attempt() (*http.Request, error) {
	req, err := r.rp.attempt()
	if err == nil {
		r.owed = nil
	}
	return req, err
}

// refund gives back to the budget the retry that next allowed and that
// got no attempt (see attempt): its response too large to keep, the
// breaker opened by its attempt, its context ended while it waited, its
// key refused it, or its body could not be had again. A retry that never
// reaches the server does not count against the budget, as a reservation
// cancelled gives its tokens back in x/time/rate. Call it once RoundTrip
// is over, on every path.
func (r *retrier) refund() {
	if r.owed != nil {
		r.owed.refund(r.owedAt)
		r.owed = nil
	}
}

// next records that an attempt was sent and ended at now with resp or err
// (sig is ratelimitheader.Parse's reading of resp), and decides whether to retry it.
// When it returns true, the caller keeps a copy of resp (or returns resp
// when it is too large to keep, see maxBufferedThrottle) and sends the
// next attempt no sooner than delay from now; otherwise it returns resp as
// it is, or err through fail. The retry is withdrawn from the budget until
// its attempt is handed out (attempt), or given back (refund).
func (r *retrier) next(resp *http.Response, err error, sig ratelimitheader.Signal, now time.Time) (delay time.Duration, retry bool) {
	r.attempts++
	free := r.heldProbe && r.p.maxAttempts > 1 // MaxAttempts 1: no retry at all
	if free {
		r.probes++
	}
	r.clock.t = now
	v := r.p.decide(retryInput{
		req: r.req, attempts: r.attempts - r.probes, replayable: r.rp.canReplay(),
		resp: resp, err: err, sig: sig,
	})
	if r.stop = v.stop; !v.retry() {
		return 0, false
	}
	var d time.Duration
	if !r.held {
		if r.bo == nil {
			r.initBackoff()
		}
		if v.hasWait {
			r.exp.Reset()
		}
		if d = r.bo.NextBackOff(); d == backoff.Stop {
			r.stop = stopAttempts
			return 0, false
		}
	}
	d = max(d, v.wait)
	at := now.Add(d)
	if r.p.maxElapsed > 0 && at.Sub(r.start) > r.p.maxElapsed {
		r.stop = stopElapsed
		return 0, false
	}
	if dl, ok := r.req.Context().Deadline(); ok && at.After(dl) {
		r.stop = stopDeadline
		return 0, false
	}
	if !free {
		if !r.budget.withdraw(now) {
			r.stop = stopBudget
			return 0, false
		}
		r.owed, r.owedAt = r.budget, now // nil without a budget: nothing owed
	}
	return d, true
}

// fail returns the error that RoundTrip fails with when the retries end
// on err: err itself when no attempt was sent, else a *RetryError with the
// number of attempts sent.
func (r *retrier) fail(err error) error {
	if r.attempts == 0 {
		return err
	}
	return &RetryError{Attempts: r.attempts, Err: err, BudgetExhausted: r.stop == stopBudget}
}

// close closes the caller's body if no attempt carried it away. Call it
// once RoundTrip is over, on every path.
func (r *retrier) close() { r.rp.close() }

// fullJitter draws each backoff uniformly in [0, interval], where interval
// is its BackOff's un-randomised value: "full jitter". cenkalti's
// RandomizationFactor draws from [(1-f)·i, (1+f)·i], which cannot express
// that range, and from the global source, which tests cannot seed.
type fullJitter struct {
	b    backoff.BackOff
	rand func(n int64) int64 // uniform in [0, n)
}

func (j *fullJitter) NextBackOff() time.Duration {
	d := j.b.NextBackOff()
	if d <= 0 {
		return d // Stop, or no wait at all
	}
	return time.Duration(j.rand(int64(d) + 1))
}

func (j *fullJitter) Reset() { j.b.Reset() }

// clockAt is a backoff.Clock that reads the time last given to the
// retrier: the backoff never looks at the real clock.
type clockAt struct{ t time.Time }

func (c *clockAt) Now() time.Time { return c.t }
