package sharedquota

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by the calls made on a Redis quota after Close.
	ErrClosed = errors.New("sharedquota: closed")

	// ErrUnavailable is what every UnavailableError is: Redis did not answer
	// in time, or answered with an error. Only FailClosed returns it from
	// Reserve; Pause returns it in every mode.
	ErrUnavailable = errors.New("sharedquota: redis unavailable")

	// ErrBadReply is what every ReplyError is: Redis answered a script with
	// a reply of an unexpected shape.
	ErrBadReply = errors.New("sharedquota: unexpected reply from redis")

	// ErrInvalidLimit is returned by Reserve for a limit whose Count or
	// Period is not positive, or for a negative cost.
	ErrInvalidLimit = errors.New("sharedquota: invalid limit")
)

// An UnavailableError reports a call that Redis did not serve: a timeout, a
// refused connection, an error reply. errors.Is(err, ErrUnavailable) holds
// for it, and Unwrap gives the cause.
type UnavailableError struct {
	// Op is the script that failed: "reserve", "pause", "paused" or
	// "heartbeat".
	Op string
	// Err is the cause, such as context.DeadlineExceeded or a network
	// error.
	Err error
}

// Error returns the message, with the operation and the cause.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("sharedquota: redis unavailable: %s: %v", e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// A ReplyError reports a script reply that is not what the script returns:
// a sign of a proxy in the way or of another program writing the same keys.
// errors.Is(err, ErrBadReply) holds for it.
type ReplyError struct {
	// Script names the script: "reserve", "pause", "paused" or
	// "heartbeat".
	Script string
	// Reply is the reply as go-redis decoded it.
	Reply any
	// Reason says what was wrong with it.
	Reason string
}

// Error returns the message, with the script, the reason and the reply.
func (e *ReplyError) Error() string {
	return fmt.Sprintf("sharedquota: unexpected reply from redis to the %s script: %s (got %T %v)", e.Script, e.Reason, e.Reply, e.Reply)
}

// Is reports whether target is ErrBadReply.
func (e *ReplyError) Is(target error) bool { return target == ErrBadReply }
