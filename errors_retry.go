package headway

import (
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
)

var (
	// ErrCircuitOpen is matched by every *CircuitOpenError: the request
	// failed at once, without being sent, because its key's circuit breaker
	// is open (or half-open with every probe in flight).
	ErrCircuitOpen = errors.New("headway: circuit open")

	// ErrRetryBudgetExhausted is matched by the *RetryError of a request
	// whose transport error would have been retried, had the retry budget
	// not been spent. A request that got a response is never failed by the
	// budget: its last response is returned instead.
	ErrRetryBudgetExhausted = errors.New("headway: retry budget exhausted")
)

// A RetryError reports a request that failed with a transport error (no
// response) once retries were over: the last attempt's error, and how many
// attempts were sent in all. When retries end on a response, even a 429 or
// a 503, that response is returned instead, and there is no error.
//
// It matches its Err with errors.Is and errors.As, and ErrRetryBudgetExhausted
// when the retry budget stopped the retries.
type RetryError struct {
	// Attempts is the number of times the request was sent, the first one
	// included.
	Attempts int
	// Err is the error of the last attempt.
	Err error
	// BudgetExhausted reports that Err would have been retried, but the
	// retry budget of the request's key was spent.
	BudgetExhausted bool
}

// Error describes the failure.
func (e *RetryError) Error() string {
	s := "attempts"
	if e.Attempts == 1 {
		s = "attempt"
	}
	if e.BudgetExhausted {
		return fmt.Sprintf("headway: %d %s, retry budget exhausted: %v", e.Attempts, s, e.Err)
	}
	return fmt.Sprintf("headway: %d %s: %v", e.Attempts, s, e.Err)
}

// Unwrap returns Err, and ErrRetryBudgetExhausted when BudgetExhausted is
// set.
func (e *RetryError) Unwrap() []error {
	if e.BudgetExhausted {
		return []error{e.Err, ErrRetryBudgetExhausted}
	}
	return []error{e.Err}
}

// Timeout reports whether Err is a timeout, so that a *url.Error wrapping a
// RetryError still reports Timeout() as net/http users expect.
func (e *RetryError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// A CircuitOpenError reports a request that failed at once, without being
// sent, because its key's circuit breaker did not let it through. It never
// names the key: keys may hold credentials (see KeyByHeader).
//
// It matches ErrCircuitOpen with errors.Is, and also gobreaker's
// ErrOpenState when State is BreakerOpen, or gobreaker's ErrTooManyRequests
// when State is BreakerHalfOpen.
type CircuitOpenError struct {
	// State is BreakerOpen, or BreakerHalfOpen when the breaker is probing
	// and every probe it allows is already in flight.
	State BreakerState
	// RetryAt is when the open breaker's open time ends: the first probe
	// goes through just after it. It is zero when State is BreakerHalfOpen:
	// a slot frees as soon as a probe ends.
	RetryAt time.Time
	// RetryIn is the time from the failure until RetryAt; zero when RetryAt
	// is zero or already past.
	RetryIn time.Duration
}

// Error describes the failure.
func (e *CircuitOpenError) Error() string {
	if e.State == BreakerHalfOpen {
		return "headway: circuit half-open, every probe in flight"
	}
	return fmt.Sprintf("headway: circuit open, next probe in %v", e.RetryIn)
}

// Unwrap returns ErrCircuitOpen and gobreaker.ErrOpenState, or
// ErrCircuitOpen and gobreaker.ErrTooManyRequests when State is
// BreakerHalfOpen.
func (e *CircuitOpenError) Unwrap() []error {
	if e.State == BreakerHalfOpen {
		return []error{ErrCircuitOpen, gobreaker.ErrTooManyRequests}
	}
	return []error{ErrCircuitOpen, gobreaker.ErrOpenState}
}
