package redislimit

import (
	"fmt"

	"github.com/egress-go/egress/throttle"
)

// FailurePolicy says what a limiter does when Redis cannot decide: it is
// unreachable, does not answer within [WithTimeout], or answers LOADING
// or MASTERDOWN. It is one of [FailClosed], [FailOpen] or [Fallback].
type FailurePolicy interface {
	failurePolicy()
}

// FailMode is a [FailurePolicy] that needs no limiter of its own.
type FailMode int

const (
	// FailClosed refuses with an *[UnavailableError]: nothing is sent
	// while Redis is away. It is the default, because exceeding a paid
	// quota is the harm this package exists to prevent.
	FailClosed FailMode = iota
	// FailOpen grants every request at once while Redis is away. Pick it
	// when the upstream's limit is soft and availability comes first.
	FailOpen
)

func (FailMode) failurePolicy() {}

// String returns "FailClosed" or "FailOpen".
func (m FailMode) String() string {
	switch m {
	case FailClosed:
		return "FailClosed"
	case FailOpen:
		return "FailOpen"
	}
	return fmt.Sprintf("FailMode(%d)", int(m))
}

type fallback struct {
	local throttle.Limiter
}

func (fallback) failurePolicy() {}

// Fallback returns a FailurePolicy that takes units from local while
// Redis is away, and pauses it too. local is an in-process limiter, so
// each of N processes spends its own budget: set it to rate/N (and
// burst/N) of the shared limit, so that together they stay within it.
func Fallback(local throttle.Limiter) FailurePolicy {
	if local == nil {
		panic("redislimit: Fallback given a nil Limiter")
	}
	return fallback{local: local}
}
