// Package metriclabel holds what the metrics adapters under extra/ share:
// values bounded to an allow-list or a cap, and the names of why a
// request failed or was refused.
package metriclabel

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

// Other is the value that stands for every key or host beyond the
// allow-list or the cap.
const Other = "other"

// Bounded bounds the values of one label or attribute: an allow-list when one is set,
// otherwise the first max distinct values seen, and [Other] for the rest.
type Bounded struct {
	allow map[string]struct{} // nil unless WithKeys was given

	// mu guards seen, which holds at most max values and only grows.
	mu   sync.RWMutex
	seen map[string]struct{}
	max  int
}

// New returns a Bounded that keeps the values in allow when it is not
// nil, and otherwise the first max distinct values it sees.
func New(allow []string, max int) *Bounded {
	l := &Bounded{max: max, seen: make(map[string]struct{})}
	if allow != nil {
		l.allow = make(map[string]struct{}, len(allow))
		for _, v := range allow {
			l.allow[v] = struct{}{}
		}
	}
	return l
}

// Label returns the value to record for v: v itself, or Other.
func (l *Bounded) Label(v string) string {
	if l.allow != nil {
		if _, ok := l.allow[v]; ok {
			return v
		}
		return Other
	}
	l.mu.RLock()
	_, ok := l.seen[v]
	full := len(l.seen) >= l.max
	l.mu.RUnlock()
	switch {
	case ok:
		return v
	case full:
		return Other
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[v]; ok {
		return v
	}
	if len(l.seen) >= l.max {
		return Other
	}
	l.seen[v] = struct{}{}
	return v
}

// Values returns the values that have a value of their own: the
// allow-list, or those seen so far.
func (l *Bounded) Values() []string {
	if l.allow != nil {
		out := make([]string, 0, len(l.allow))
		for v := range l.allow {
			out = append(out, v)
		}
		return out
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]string, 0, len(l.seen))
	for v := range l.seen {
		out = append(out, v)
	}
	return out
}

// Reasons a request is refused, the values of the "reason" label.
const (
	ReasonQueueFull = "queue_full"
	ReasonLimit     = "limit_exceeded"
	ReasonTimeout   = "timeout"
	ReasonError     = "limiter_error"
)

// RefusalReason names why the Transport refused a request.
func RefusalReason(err error) string {
	var le *throttle.LimitError
	switch {
	case errors.Is(err, queue.ErrFull):
		return ReasonQueueFull
	case errors.As(err, &le) && le.Deadline:
		return ReasonTimeout
	case le != nil:
		return ReasonLimit
	}
	return ReasonError
}

// ErrorType names the error a request ended with, for error.type (or an
// error_type label): the refusals by their reason, a context's end as "canceled" or
// "timeout", a network timeout as "timeout", and anything else as
// "_OTHER", as OpenTelemetry's error.type does.
func ErrorType(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, queue.ErrFull):
		return ReasonQueueFull
	case errors.Is(err, throttle.ErrLimitExceeded):
		return RefusalReason(err)
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "_OTHER"
}

// Method returns the method if it is one of the standard ones, and
// "_OTHER" otherwise, so that the method stays bounded, as the conventions ask.
func Method(m string) string {
	switch m {
	case "", http.MethodGet:
		return http.MethodGet
	case http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// Refusal reports whether err is the Transport's refusal to send.
func Refusal(err error) bool {
	return errors.Is(err, queue.ErrFull) || errors.Is(err, throttle.ErrLimitExceeded)
}
