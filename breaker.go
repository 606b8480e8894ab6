package headway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerState is the state of a key's circuit breaker.
type BreakerState uint8

const (
	// BreakerClosed lets every request through and counts their outcomes.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen lets a few probes through after the open time: their
	// successes close the breaker, a failure opens it again.
	BreakerHalfOpen
	// BreakerOpen fails every request at once with a *CircuitOpenError.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// BreakerSettings configures the circuit breaker of each key (a
// sony/gobreaker/v2 breaker). The zero value means the defaults.
//
// A response with a 5xx status and a transport error count as failures,
// but for 501 Not Implemented and 505 HTTP Version Not Supported, and a
// 503 or 529 that states its wait (Retry-After, or a dialect's wait),
// which pauses the key as a 429 does. Every other response counts as a
// success, 429, other 4xx, 501 and 505 included: a throttle or a refusal
// of the request shows a server at work, not an outage. A request whose
// context ended (the caller gave up), or that was cancelled, counts as
// neither, unless its host hangs: a caller that gave up on a request its
// host left unanswered for much longer than its answers usually take
// counts as a failure when the host answered no other request of the key
// since it left, or left half of the key's recent requests or more
// unanswered so (see "Outages" in the package documentation).
//
// The breaker opens when, within Interval, ConsecutiveFailures failures
// came in a row, or at least MinRequests outcomes were counted and the
// share of failures among them reached FailureRatio. While open, requests
// fail at once with a *CircuitOpenError. After Timeout it lets MaxRequests
// probes through (half-open): as many successes in a row close it, any
// failure opens it again.
type BreakerSettings struct {
	// Interval is the window over which outcomes are counted while closed,
	// rolling in ten buckets. The default is 60 seconds.
	Interval time.Duration

	// FailureRatio is the share of failures, from 0 to 1, that opens the
	// breaker once MinRequests outcomes are counted. The default is 0.5; a
	// negative value disables this rule.
	FailureRatio float64

	// MinRequests is the fewest outcomes within Interval for FailureRatio to
	// apply. The default is 10.
	MinRequests int

	// ConsecutiveFailures is the number of failures in a row that open the
	// breaker, whatever the ratio. The default is 5; a negative value
	// disables this rule.
	ConsecutiveFailures int

	// Timeout is how long the breaker stays open before it lets probes
	// through. The default is 30 seconds; in hold mode it is half of
	// RetryOptions.ProbeInterval, so that the outage state's schedule
	// alone spaces the probes (200 ms, doubling up to 500 ms, by default)
	// and held requests go soon after the host is back.
	Timeout time.Duration

	// MaxRequests is the number of probes let through at once while
	// half-open, and the number of successes in a row that close the
	// breaker. The default is 1.
	MaxRequests int

	// Hold chooses what an open breaker does with requests. False, the
	// default, fails them fast: every request of the key, queued ones
	// included, fails at once with a *CircuitOpenError until a probe gets
	// through; for online paths that have a fallback. True holds them:
	// they wait in the key's queue, in order, behind the half-open probe,
	// their deadlines and QueueOptions.MaxWait permitting, and go at the
	// key's pace as soon as a probe succeeds; for batch work, which must
	// not lose records. A held request that cannot wait for the next probe
	// fails at once with a *WaitError whose NextProbe says when it goes.
	//
	// In hold mode an outage costs a request time, not attempts: while
	// the key holds (its breaker open, or its outage state probing; see
	// "Outages" in the package documentation), a request whose attempt
	// was the probe and failed spends neither one of its
	// RetryOptions.MaxAttempts nor its key's retry budget, and goes again
	// as the next probe. It ends only when a probe succeeds, or when its
	// context's deadline, RetryOptions.MaxElapsed (2 minutes by default)
	// or QueueOptions.MaxWait would pass before its next probe: then at
	// once, with its last response, or a *RetryError whose Err is the
	// *WaitError. What RetryOptions does not retry (a status not in
	// Statuses, MaxAttempts 1) is not retried as a probe either. A request
	// that fails on its own (a 500 of its own, from a host that serves
	// the others) probes as long, and its key's queue waits behind it:
	// MaxElapsed bounds that too. Without
	// hold mode every probe is an attempt: a request to a host that stays
	// down ends after MaxAttempts. While open, the breaker also spaces
	// the probes by Timeout, which in hold mode defaults to the outage
	// state's longest wait between probes; a longer Timeout spaces them
	// further.
	Hold bool

	// OnStateChange, when set, is called on every change of a key's state,
	// with the key. Calls come in the order of the changes, one at a time,
	// and never under a lock, so the hook may use the Transport; they may
	// come from another goroutine than the request that caused the change,
	// and after its RoundTrip returned. The key may hold credentials
	// (KeyByHeader): the hook should not log it as it is.
	OnStateChange func(key string, from, to BreakerState)
}

// Defaults of BreakerSettings, documented on its fields.
const (
	defaultBreakerInterval     = 60 * time.Second
	defaultFailureRatio        = 0.5
	defaultBreakerMinRequests  = 10
	defaultConsecutiveFailures = 5
	defaultBreakerTimeout      = 30 * time.Second
	defaultBreakerMaxRequests  = 1
)

const breakerBuckets = 10

// outcome is what one sent request tells a breaker.
type outcome uint8

const (
	outcomeSuccess  outcome = iota
	outcomeFailure          // counts towards opening
	outcomeExcluded         // counts as neither; frees a half-open probe slot
)

func (o outcome) String() string {
	switch o {
	case outcomeSuccess:
		return "success"
	case outcomeFailure:
		return "failure"
	}
	return "excluded"
}

// classify returns the outcome of a request that ended with resp or err,
// whose context's Err() was ctxErr when it ended. throttle reports that
// resp is a throttle that states its wait (a 503 or 529 with
// Retry-After): a server at work that names when to come back.
func classify(resp *http.Response, err error, ctxErr error, throttle bool) outcome {
	switch {
	case ctxErr != nil, errors.Is(err, context.Canceled):
		return outcomeExcluded
	case err != nil, resp == nil:
		return outcomeFailure
	case hostFailing(resp.StatusCode) && !throttle:
		return outcomeFailure
	}
	return outcomeSuccess
}

// Errors handed to gobreaker's done callback to carry an outcome.
var (
	errBreakerFailure  = errors.New("headway: breaker failure")
	errBreakerExcluded = errors.New("headway: breaker excluded")
)

// breaker is the circuit breaker of one key: a gobreaker two-step breaker,
// and the state-change hook delivered outside gobreaker's lock. Its methods
// are safe for concurrent use.
//
// gobreaker reads time.Now itself: the breaker's states follow the real
// clock (or synctest's), not a parameter.
type breaker struct {
	key     string
	hold    bool // BreakerSettings.Hold
	cb      *gobreaker.TwoStepCircuitBreaker[struct{}]
	timeout time.Duration
	hook    func(key string, from, to BreakerState)

	// mu guards the fields below. It is taken inside gobreaker's lock (by
	// onChange) and never held while calling gobreaker or the hook.
	mu         sync.Mutex
	openedAt   time.Time
	pending    []stateChange // changes not yet delivered to hook, oldest first
	delivering bool          // a goroutine is delivering pending
	npending   atomic.Int32  // len(pending), read without mu

	lastState atomic.Uint32 // the BreakerState after the last change, for metrics
}

type stateChange struct{ from, to BreakerState }

// newBreaker returns the breaker of key, closed.
func newBreaker(key string, s BreakerSettings) *breaker {
	if s.Interval <= 0 {
		s.Interval = defaultBreakerInterval
	}
	if s.FailureRatio == 0 {
		s.FailureRatio = defaultFailureRatio
	}
	if s.MinRequests <= 0 {
		s.MinRequests = defaultBreakerMinRequests
	}
	if s.ConsecutiveFailures == 0 {
		s.ConsecutiveFailures = defaultConsecutiveFailures
	}
	if s.Timeout <= 0 {
		s.Timeout = defaultBreakerTimeout
	}
	if s.MaxRequests <= 0 {
		s.MaxRequests = defaultBreakerMaxRequests
	}
	b := &breaker{key: key, timeout: s.Timeout, hook: s.OnStateChange}
	ratio, minReq, consec := s.FailureRatio, uint32(s.MinRequests), s.ConsecutiveFailures
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		MaxRequests:  uint32(s.MaxRequests),
		Interval:     s.Interval,
		BucketPeriod: max(s.Interval/breakerBuckets, 1),
		Timeout:      s.Timeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if consec > 0 && c.ConsecutiveFailures >= uint32(consec) {
				return true
			}
			n := c.TotalSuccesses + c.TotalFailures
			return ratio > 0 && n >= minReq && float64(c.TotalFailures) >= ratio*float64(n)
		},
		OnStateChange: b.onChange,
		IsExcluded:    func(err error) bool { return err == errBreakerExcluded },
	})
	return b
}

// allow asks whether a request may be sent at now. If so, done must be
// called exactly once with the request's outcome (see classify), or with
// outcomeExcluded if it is not sent after all. If not, err is a
// *CircuitOpenError.
func (b *breaker) allow(now time.Time) (done func(outcome), err error) {
	gbDone, err := b.cb.Allow()
	b.flush()
	if err != nil {
		return nil, b.openError(err, now)
	}
	called := false
	return func(o outcome) {
		if called {
			return
		}
		called = true
		switch o {
		case outcomeSuccess:
			gbDone(nil)
		case outcomeFailure:
			gbDone(errBreakerFailure)
		default:
			gbDone(errBreakerExcluded)
		}
		b.flush()
	}, nil
}

// allowHold is allow for a breaker in hold mode, whose refusal is not an
// error but a wait: until RetryAt, or, when RetryAt is zero, until the
// probe in flight ends.
func (b *breaker) allowHold(now time.Time) (func(outcome), *CircuitOpenError) {
	done, err := b.allow(now)
	if err != nil {
		return nil, err.(*CircuitOpenError)
	}
	return done, nil
}

// openError turns gobreaker's refusal into a *CircuitOpenError.
func (b *breaker) openError(err error, now time.Time) *CircuitOpenError {
	if errors.Is(err, gobreaker.ErrTooManyRequests) {
		return &CircuitOpenError{State: BreakerHalfOpen}
	}
	at := b.retryAt()
	return &CircuitOpenError{State: BreakerOpen, RetryAt: at, RetryIn: max(at.Sub(now), 0)}
}

// state returns the breaker's state, moving it from open to half-open if
// its open time is over.
func (b *breaker) state() BreakerState {
	s := BreakerState(b.cb.State())
	b.flush()
	return s
}

// retryAt returns when the breaker, last opened, lets probes through.
func (b *breaker) retryAt() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openedAt.Add(b.timeout)
}

// onChange is gobreaker's OnStateChange, called under gobreaker's lock: it
// notes the change and leaves its delivery to flush.
func (b *breaker) onChange(_ string, from, to gobreaker.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if to == gobreaker.StateOpen {
		b.openedAt = time.Now()
	}
	b.lastState.Store(uint32(to))
	if b.hook != nil {
		b.pending = append(b.pending, stateChange{BreakerState(from), BreakerState(to)})
		b.npending.Add(1)
	}
}

// flush delivers the pending state changes to the hook, in order, outside
// every lock. One goroutine delivers at a time: one that finds another at
// it leaves the changes it caused to that one, so the hook sees changes in
// order and never concurrently, and may call back into the breaker.
func (b *breaker) flush() {
	if b.npending.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	defer func() {
		// Reached with mu held, normally or when the hook panics.
		b.delivering = false
		b.mu.Unlock()
	}()
	for len(b.pending) > 0 {
		c := b.pending[0]
		b.pending[0] = stateChange{}
		b.pending = b.pending[1:]
		if len(b.pending) == 0 {
			b.pending = nil
		}
		b.npending.Add(-1)
		b.mu.Unlock()
		func() {
			defer b.mu.Lock()
			b.hook(b.key, c.from, c.to)
		}()
	}
}
