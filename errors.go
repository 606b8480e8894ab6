package headway

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrQueueFull is returned when a request cannot leave at once and its
	// key's queue already holds QueueOptions.MaxLen requests.
	ErrQueueFull = errors.New("headway: queue full")

	// ErrWaitTooLong is matched by every *WaitError: the request would have
	// had to wait longer than its deadline or QueueOptions.MaxWait allow.
	ErrWaitTooLong = errors.New("headway: wait too long")

	// ErrCostTooLarge is matched by every *CostError: the request costs more
	// than one of its limits can ever let through at once.
	ErrCostTooLarge = errors.New("headway: cost exceeds burst")

	// ErrInvalidCost is matched by the *CostError of a request whose cost is
	// negative.
	ErrInvalidCost = errors.New("headway: invalid cost")

	// errNilResponse is the error of an attempt whose base RoundTripper
	// returned neither a response nor an error.
	errNilResponse = errors.New("headway: base RoundTripper returned a nil response and a nil error")

	// errNilURL is the error of a request without a URL, which net/http's
	// Transport fails with an error of its own too.
	errNilURL = errors.New("headway: nil Request.URL")

	// errEvicted tells acquire's caller that the key was evicted between
	// look-up and lock; it never reaches a user.
	errEvicted = errors.New("headway: key evicted")
)

// A WaitError reports that a request failed without being sent because the
// wait for its slot was longer than it was allowed to wait: the time left
// before its context's deadline, QueueOptions.MaxWait, or, for a wait the
// server named (Stated), the cap set by WithMaxServerWait.
//
// It matches ErrWaitTooLong with errors.Is, and context.DeadlineExceeded
// unless Stated, and reports Timeout() true like other net/http timeouts.
type WaitError struct {
	// Wait is the wait that was needed, at least. When MaxWait expired
	// while waiting, it is MaxWait. When Stated, it is what is left of the
	// wait the server named.
	Wait time.Duration
	// Allowed is the wait the request could afford.
	Allowed time.Duration
	// NextProbe is set when the wait is for the host of the request's key
	// to come back: the key is probing it after failures (5xx, broken
	// connections, timeouts), and NextProbe is when its next probe goes.
	// It is zero otherwise.
	NextProbe time.Time
	// Stated reports that Wait was named by the server (Retry-After, or
	// the reset of an exhausted quota) and is longer than the cap set by
	// WithMaxServerWait, which Allowed holds.
	Stated bool
}

// Error describes the failure.
func (e *WaitError) Error() string {
	if !e.NextProbe.IsZero() {
		return fmt.Sprintf("headway: host down, next probe in %v, exceeds the %v allowed", e.Wait, e.Allowed)
	}
	if e.Stated {
		return fmt.Sprintf("headway: the server named a wait of %v, above the cap of %v", e.Wait, e.Allowed)
	}
	return fmt.Sprintf("headway: wait of %v exceeds the %v allowed", e.Wait, e.Allowed)
}

// Unwrap returns ErrWaitTooLong and, unless Stated, context.DeadlineExceeded.
func (e *WaitError) Unwrap() []error {
	if e.Stated {
		return []error{ErrWaitTooLong}
	}
	return []error{ErrWaitTooLong, context.DeadlineExceeded}
}

// Timeout reports true: a WaitError is a timeout.
func (e *WaitError) Timeout() bool { return true }

// A CostError reports a request whose cost exceeds the burst of one of its
// key's limits: it could never be sent, so it fails at once. It matches
// ErrCostTooLarge with errors.Is, or ErrInvalidCost when the cost is
// negative.
type CostError struct {
	Cost  int   // the request's cost
	Limit Limit // the limit it does not fit
}

// Error describes the failure.
func (e *CostError) Error() string {
	if e.Cost < 0 {
		return fmt.Sprintf("headway: negative cost %d", e.Cost)
	}
	return fmt.Sprintf("headway: cost %d exceeds the burst of limit %v", e.Cost, e.Limit)
}

// Unwrap returns ErrCostTooLarge, or ErrInvalidCost for a negative cost.
func (e *CostError) Unwrap() error {
	if e.Cost < 0 {
		return ErrInvalidCost
	}
	return ErrCostTooLarge
}
