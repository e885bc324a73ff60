package redislimit

import (
	"errors"
	"fmt"
)

var (
	// ErrUnavailable reports that Redis could not decide: it was
	// unreachable, did not answer within [WithTimeout], or said it cannot
	// serve now (READONLY after a failover, LOADING, MASTERDOWN,
	// CLUSTERDOWN, TRYAGAIN, BUSY...), or the circuit breaker is open
	// after such a failure. Errors that wrap it are *[UnavailableError]s.
	ErrUnavailable = errors.New("redislimit: redis unavailable")

	// ErrClosed reports a call on a limiter whose [Client] is closed.
	ErrClosed = errors.New("redislimit: closed")
)

// UnavailableError is what [FailClosed] returns when Redis cannot decide.
// It matches [ErrUnavailable] with errors.Is, and unwraps to the cause.
type UnavailableError struct {
	// Err is the failure, or ErrUnavailable itself when the circuit
	// breaker turned the call away without trying.
	Err error
}

// Error names ErrUnavailable and the cause, if there is one.
func (e *UnavailableError) Error() string {
	if e.Err == nil || e.Err == ErrUnavailable {
		return ErrUnavailable.Error()
	}
	return fmt.Sprintf("%v: %v", ErrUnavailable, e.Err)
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrUnavailable].
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
