package egressprom

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

// Other is the label value that stands for every key or host beyond the
// allow-list or the cap ([WithKeys], [WithMaxKeys]).
const Other = "other"

// labeler bounds the values of one label: an allow-list when one is set,
// otherwise the first max distinct values seen, and [Other] for the rest.
type labeler struct {
	allow map[string]struct{} // nil unless WithKeys was given

	// mu guards seen, which holds at most max values and only grows.
	mu   sync.RWMutex
	seen map[string]struct{}
	max  int
}

func newLabeler(allow []string, max int) *labeler {
	l := &labeler{max: max, seen: make(map[string]struct{})}
	if allow != nil {
		l.allow = make(map[string]struct{}, len(allow))
		for _, v := range allow {
			l.allow[v] = struct{}{}
		}
	}
	return l
}

// label returns the label value for v: v itself, or Other.
func (l *labeler) label(v string) string {
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

// Reasons a request is refused, the values of the "reason" label.
const (
	reasonQueueFull = "queue_full"
	reasonLimit     = "limit_exceeded"
	reasonTimeout   = "timeout"
	reasonError     = "limiter_error"
)

// refusalReason names why the Transport refused a request.
func refusalReason(err error) string {
	var le *throttle.LimitError
	switch {
	case errors.Is(err, queue.ErrFull):
		return reasonQueueFull
	case errors.As(err, &le) && le.Deadline:
		return reasonTimeout
	case le != nil:
		return reasonLimit
	}
	return reasonError
}

// errorType names the error a request ended with, for the error_type
// label: the refusals by their reason, a context's end as "canceled" or
// "timeout", a network timeout as "timeout", and anything else as
// "_OTHER", as OpenTelemetry's error.type does.
func errorType(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, queue.ErrFull):
		return reasonQueueFull
	case errors.Is(err, throttle.ErrLimitExceeded):
		return refusalReason(err)
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "_OTHER"
}

// method returns req's method if it is one of the standard ones, and
// "_OTHER" otherwise, so that the method label stays bounded.
func method(m string) string {
	switch m {
	case "", http.MethodGet:
		return http.MethodGet
	case http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// refusal reports whether err is the Transport's refusal to send.
func refusal(err error) bool {
	return errors.Is(err, queue.ErrFull) || errors.Is(err, throttle.ErrLimitExceeded)
}
