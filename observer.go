package egress

import (
	"net/http"
	"time"

	"github.com/egress-go/egress/throttle"
)

// Observer receives what a [Transport] does to requests, for metrics and
// logs: the library itself never logs. Each field is optional; a nil func
// is not called. The funcs are called synchronously on the goroutine of
// the request's RoundTrip, never while a lock is held, so they must be
// quick and safe for concurrent use.
//
// Install one with [WithObserver].
type Observer struct {
	// Waited is called once per attempt that had to wait, just before it
	// is sent: for a slot in the queue, for its slot in the limiter's
	// budget, or both.
	Waited func(WaitInfo)

	// Refused is called when the Transport refuses to send an attempt
	// itself: the queue is full, the limiter refuses, or the limiter
	// fails. A refused retry is reported too, although RoundTrip then
	// returns the response that the retry was for.
	Refused func(RefusalInfo)

	// Sent is called after each attempt returns from the base
	// RoundTripper, with its response's status or its error, and how long
	// the base took: one call per request on the wire, retries included.
	// When Sent is nil the Transport reads no clock for it.
	Sent func(SentInfo)

	// Retrying is called when a response is set aside to try again,
	// before the delay. If the retry cannot be made, the response set
	// aside is returned after all.
	Retrying func(RetryInfo)

	// Paused is called when a response makes the Transport pause a key.
	Paused func(PauseInfo)

	// Clamped is called when a response states a quota with absurd values
	// (a limit of 0, a remaining of 10¹⁸, a reset years ahead), which the
	// Transport made safe before booking it.
	Clamped func(ClampInfo)
}

// ClampInfo describes a quota statement whose absurd values were clamped.
type ClampInfo struct {
	// Key is the budget key the response was for.
	Key string
	// StatusCode is the status of the response.
	StatusCode int
	// Stated is the quota as the headers stated it.
	Stated throttle.Statement
	// Used is the quota as recorded: Limit unknown (-1) instead of 0 or
	// beyond [throttle.MaxStatedCount], Remaining at most the limit, Reset
	// and Window at most the retry policy's MaxPause.
	Used throttle.Statement
	// Fields names the fields changed: "Limit", "Remaining", "Reset",
	// "Window".
	Fields []string
}

// WaitInfo describes how long an attempt waited before it was sent.
type WaitInfo struct {
	// Key is the request's budget key.
	Key string
	// Attempt counts the attempts of this request, from 1.
	Attempt int
	// Queue is how long the request waited in line for a queue slot. Only
	// the first attempt waits in line: later ones keep the slot.
	Queue time.Duration
	// Limiter is how long the attempt waited for its slot in the key's
	// budget, including any pause learned while it waited.
	Limiter time.Duration
}

// SentInfo describes one attempt that the base RoundTripper answered.
type SentInfo struct {
	// Key is the request's budget key.
	Key string
	// Attempt counts the attempts of this request, from 1: Attempt-1 is
	// OpenTelemetry's http.request.resend_count.
	Attempt int
	// Request is the request sent for this attempt. It must not be
	// modified, and its body was handed to the base RoundTripper.
	Request *http.Request
	// StatusCode is the response's status, or 0 when the attempt failed.
	StatusCode int
	// Err is the base RoundTripper's error, or nil when a response came.
	Err error
	// Duration is how long the base RoundTripper took to answer: until
	// the response's headers, not its body.
	Duration time.Duration
}

// RefusalInfo describes a request the Transport refused to send.
type RefusalInfo struct {
	// Key is the request's budget key.
	Key string
	// Attempt counts the attempts of this request, from 1.
	Attempt int
	// Request is the caller's request. It must not be modified.
	Request *http.Request
	// Err says why, and is the error RoundTrip returns, unless an earlier
	// attempt's response is returned instead: it matches [queue.ErrFull]
	// or [throttle.ErrLimitExceeded] with errors.Is, or is the limiter's
	// own error.
	Err error
	// Elapsed is how long the request had been in RoundTrip when it was
	// refused, counted from the start of its first wait: in line for a
	// queue slot, for its slot in the key's budget, or on the wire for an
	// earlier attempt. It is 0 for a request refused before it waited at
	// all, which saves a clock read on every request that is not refused.
	Elapsed time.Duration
}

// RetryInfo describes a response the Transport set aside to try again.
type RetryInfo struct {
	// Key is the request's budget key.
	Key string
	// Attempt is the attempt that got the response, from 1.
	Attempt int
	// StatusCode is the status of the response set aside.
	StatusCode int
	// Delay is how long the request waits before it books its next slot:
	// the server's delay plus jitter, or a local backoff.
	Delay time.Duration
}

// PauseInfo describes a pause of a key that a response asked for.
type PauseInfo struct {
	// Key is the paused budget key.
	Key string
	// StatusCode is the status of the response that asked for the pause.
	StatusCode int
	// Duration is how long the key is paused from now: the server's delay,
	// capped at the retry policy's MaxPause.
	Duration time.Duration
	// Err is the limiter's error if the pause failed, as it may when the
	// limiter's state lives in Redis. The response is returned regardless.
	Err error
}

// Then returns an Observer that reports each event to o and then to next:
// for every func either one has, the result calls o's, then next's. A
// nil o or next reports nothing of its own. Metrics adapters use it to
// record an event and pass it on to a program's own Observer.
func (o *Observer) Then(next *Observer) *Observer {
	var a, b Observer
	if o != nil {
		a = *o
	}
	if next != nil {
		b = *next
	}
	return &Observer{
		Waited:   both(a.Waited, b.Waited),
		Refused:  both(a.Refused, b.Refused),
		Sent:     both(a.Sent, b.Sent),
		Retrying: both(a.Retrying, b.Retrying),
		Paused:   both(a.Paused, b.Paused),
		Clamped:  both(a.Clamped, b.Clamped),
	}
}

// both returns a func that calls f then g, skipping either when nil, or
// nil when both are.
func both[T any](f, g func(T)) func(T) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(v T) {
		f(v)
		g(v)
	}
}
