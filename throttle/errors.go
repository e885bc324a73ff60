package throttle

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrLimitExceeded reports that the units could not be had within the
	// time the caller allowed. Errors that wrap it are *[LimitError]s.
	ErrLimitExceeded = errors.New("throttle: limit exceeded")

	// ErrExceedsCapacity reports a request for more units than the limiter
	// can ever grant at once (more than its burst, capacity or limit).
	ErrExceedsCapacity = errors.New("throttle: n exceeds the limiter's capacity")

	// ErrTooManyKeys reports that the limiter holds live state for as many
	// keys as [WithMaxKeys] allows and none of them can be dropped without
	// forgetting units already spent.
	ErrTooManyKeys = errors.New("throttle: too many keys")
)

// LimitError is returned when units could not be had in time. It matches
// [ErrLimitExceeded] with errors.Is.
type LimitError struct {
	// Key is the budget key that was refused.
	Key string
	// RetryAfter is how long until the same request would be granted, if
	// nobody else books in between.
	RetryAfter time.Duration
	// Deadline is true when the caller's context deadline, rather than a
	// maxWait of 0 or a full queue, caused the refusal.
	Deadline bool
}

// Error names the key and how long until the request would be granted.
func (e *LimitError) Error() string {
	return fmt.Sprintf("throttle: limit exceeded for key %q, retry after %v", e.Key, e.RetryAfter)
}

// Unwrap returns [ErrLimitExceeded].
func (e *LimitError) Unwrap() error { return ErrLimitExceeded }

// Timeout reports whether a deadline caused the refusal, for callers that
// test errors with an interface{ Timeout() bool } as net does.
func (e *LimitError) Timeout() bool { return e.Deadline }
