package retryafter

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Defaults that a zero Policy field stands for.
const (
	// DefaultMaxAttempts is the first try and three retries: enough to ride
	// out a short overload, few enough that one request does not grow a
	// long tail, in line with common SDKs' two or three retries.
	DefaultMaxAttempts = 4

	// DefaultMaxDelay is the longest server delay slept through inside one
	// request. Half a minute fits a typical request budget and covers most
	// per-second and many per-minute limits; a longer wait is better spent
	// as a pause of the key, with the response handed back to the caller.
	DefaultMaxDelay = 30 * time.Second

	// DefaultMaxPause caps how long one response pauses a key. A minute
	// covers per-second and per-minute windows in full, while a wrong or
	// hostile header (a 114-hour Retry-After) stalls the fleet for at most
	// a minute at a time; if the quota is still out, the next response
	// pauses it again.
	DefaultMaxPause = 60 * time.Second

	// DefaultBackoffBase is the first local backoff, when the server gave no
	// delay. Each later attempt doubles it, up to MaxDelay.
	DefaultBackoffBase = 100 * time.Millisecond

	// maxServerJitter caps the jitter added on top of a server's delay.
	maxServerJitter = time.Second
)

// DefaultStatuses returns the statuses a zero Policy retries: 429 Too Many
// Requests, 503 Service Unavailable and 529 (overloaded). It returns a new
// slice on every call.
func DefaultStatuses() []int {
	return []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, StatusOverloaded}
}

// Policy decides whether to retry a request and how long to wait first
// ([Policy.Next]), and how long to pause every request that shares a budget
// ([Policy.Pause]).
//
// A server's delay is kept as given, with jitter only added on top, with
// one floor: a delay of 0 (Retry-After: 0) is taken as no delay, and the
// retry waits the local backoff for its attempt instead of going at once,
// so that a server saying 0 on every 429 is not sent MaxAttempts requests
// back to back. Such a response pauses no other caller.
//
// The zero value is ready to use: each zero field means its default, which
// the field's comment gives. A negative number is invalid; [Policy.Validate]
// reports it, and Next and Pause treat it as the default. To disable retries,
// set MaxAttempts to 1.
//
// A Policy is a value; its methods are safe for concurrent use when the
// Backoff and Jitter funcs are.
type Policy struct {
	// MaxAttempts is how many times a request is sent in all, counting the
	// first. 0 means DefaultMaxAttempts; 1 means never retry.
	MaxAttempts int

	// MaxDelay is the longest wait before a retry. A server delay longer
	// than it is not slept through: Next says not to retry, so the response
	// returns at once (and Pause still pauses the key). Local backoff is
	// capped at it. 0 means DefaultMaxDelay.
	MaxDelay time.Duration

	// MaxPause caps how long Pause pauses a key on one response. 0 means
	// DefaultMaxPause.
	MaxPause time.Duration

	// Statuses lists the response statuses Next retries. nil means
	// DefaultStatuses(); an empty non-nil slice retries none. A 403 in the
	// list is retried only when Throttled says it is throttling: a plain 403
	// is an authorization failure.
	Statuses []int

	// Backoff returns the wait before the next attempt when attempt (from
	// 1) failed and the server gave no delay. Results are clamped to
	// [0, MaxDelay]. nil means exponential backoff: DefaultBackoffBase,
	// doubling with each attempt up to MaxDelay, then randomized to between
	// half and one and a half times that, and capped at MaxDelay.
	Backoff func(attempt int) time.Duration

	// Jitter returns a random duration in [0, max). Results outside are
	// clamped. nil means a uniform draw from math/rand/v2. Set it to make
	// Next deterministic in tests.
	Jitter func(max time.Duration) time.Duration

	// RetryNonIdempotent allows retrying non-idempotent requests (a POST
	// without an Idempotency-Key, say) on every status in Statuses. By
	// default only a 429, which the server did not process, is retried for
	// every method.
	RetryNonIdempotent bool
}

// Validate reports the first invalid field of p, naming it and its value.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("retryafter: Policy.MaxAttempts is %d, want 0 (the default) or more", p.MaxAttempts)
	case p.MaxDelay < 0:
		return fmt.Errorf("retryafter: Policy.MaxDelay is %v, want 0 (the default) or more", p.MaxDelay)
	case p.MaxPause < 0:
		return fmt.Errorf("retryafter: Policy.MaxPause is %v, want 0 (the default) or more", p.MaxPause)
	}
	for _, s := range p.Statuses {
		if s < 100 || s > 999 {
			return fmt.Errorf("retryafter: Policy.Statuses holds %d, which is not an HTTP status", s)
		}
	}
	return nil
}

// Next reports whether to retry req after resp, which answered attempt
// number attempt (the first is 1), and how long to wait first. It is a pure
// function of its arguments and p: it reads no clock and does no I/O.
//
// It retries only when all of these hold:
//
//   - attempt is below MaxAttempts;
//   - resp's status is in Statuses (a 403 also has to be Throttled);
//   - the body can be replayed: req.Body is nil or http.NoBody, or
//     req.GetBody is set;
//   - the status is 429, or req is idempotent (GET, HEAD, OPTIONS, TRACE,
//     PUT or DELETE, or carrying an Idempotency-Key or X-Idempotency-Key
//     header, as net/http decides), or RetryNonIdempotent is set, or the
//     server says a retry is safe (X-Should-Retry: true, as OpenAI and
//     Anthropic send it, or Stripe-Should-Retry: true);
//   - the server does not say not to retry (X-Should-Retry: false or
//     Stripe-Should-Retry: false).
//
// When the server gave a delay ([Parse]), wait is that delay plus jitter: up
// to a tenth of it, at most one second, and only ever added, so a retry never
// comes early, and a fleet that was told the same reset does not return in
// the same instant. A delay over MaxDelay means no retry. When the server
// gave no delay, wait is Backoff(attempt).
//
// A server delay of 0 (Retry-After: 0, or a date already past) counts as
// no delay: wait is Backoff(attempt), not 0. Taken literally, it had a
// server that answers every attempt with a 429 and Retry-After: 0 sent
// all of MaxAttempts back to back, the load a throttled server least
// wants. The local backoff is the floor that OpenAI's and Anthropic's SDKs
// keep too: they honour a Retry-After only when it is above 0. A positive
// delay, however short (retry-after-ms: 5), is the server's and is kept.
//
// When retry is false, wait is 0. A nil req or resp is never retried.
func (p Policy) Next(req *http.Request, resp *http.Response, attempt int, now time.Time) (wait time.Duration, retry bool) {
	if req == nil || resp == nil {
		return 0, false
	}
	attempt = max(attempt, 1)
	said := shouldRetry(resp.Header)
	if attempt >= p.maxAttempts() ||
		!slices.Contains(p.statuses(), resp.StatusCode) ||
		(resp.StatusCode == http.StatusForbidden && !Throttled(resp)) ||
		!replayable(req) ||
		(resp.StatusCode != http.StatusTooManyRequests && !p.RetryNonIdempotent && !idempotent(req) && said != shouldRetryYes) ||
		said == shouldRetryNo {
		return 0, false
	}
	maxDelay := p.maxDelay()
	if d, ok := Parse(resp.Header, now); ok && d > 0 {
		if d > maxDelay {
			return 0, false
		}
		j := p.jitter(min(d/10, maxServerJitter))
		return max(d, min(d+j, maxDelay)), true
	}
	return p.backoff(attempt, maxDelay), true
}

// Pause reports how long to pause every request that shares resp's budget,
// and whether to pause at all. It pauses when:
//
//   - resp is Throttled and the server gave a delay ([Parse]); or
//   - resp's quota headers say a quota's remaining is 0 and when it resets,
//     whatever the status, as on a 200 that spent the last unit.
//
// The pause is that delay, capped at MaxPause, with no jitter: the limiter
// spaces the requests that follow. A throttling response with no delay, a
// delay of 0, and a 200 with remaining=5 do not pause. Backoff without a
// server delay stays local to the request, in [Policy.Next].
func (p Policy) Pause(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	f := scan(resp.Header)
	if !f.has(presentRetryAfter | presentQuota) {
		return 0, false
	}
	var d time.Duration
	var ok bool
	if Throttled(resp) {
		d, ok = f.parse(now)
	} else {
		d, ok = f.exhaustedWait(now)
	}
	if !ok || d <= 0 {
		return 0, false
	}
	return min(d, p.maxPause()), true
}

func (p Policy) maxAttempts() int {
	if p.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

func (p Policy) maxDelay() time.Duration {
	if p.MaxDelay <= 0 {
		return DefaultMaxDelay
	}
	return p.MaxDelay
}

func (p Policy) maxPause() time.Duration {
	if p.MaxPause <= 0 {
		return DefaultMaxPause
	}
	return p.MaxPause
}

func (p Policy) statuses() []int {
	if p.Statuses == nil {
		return DefaultStatuses()
	}
	return p.Statuses
}

// jitter returns a draw in [0, limit].
func (p Policy) jitter(limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	var j time.Duration
	if p.Jitter != nil {
		j = p.Jitter(limit)
	} else {
		j = time.Duration(rand.Int64N(int64(limit)))
	}
	return min(max(j, 0), limit)
}

// backoff returns the local wait after attempt, clamped to [0, maxDelay].
func (p Policy) backoff(attempt int, maxDelay time.Duration) time.Duration {
	if p.Backoff != nil {
		return min(max(p.Backoff(attempt), 0), maxDelay)
	}
	// A fresh ExponentialBackOff per call: it is not safe for concurrent
	// use. Its randomization is off, and the fixed clock keeps it from
	// reading the wall clock; the jitter comes from p.Jitter instead. It is
	// a value, not NewExponentialBackOff's pointer, so that it stays on the
	// stack; Reset does the rest of what the constructor does.
	b := backoff.ExponentialBackOff{
		InitialInterval:     min(DefaultBackoffBase, maxDelay),
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         maxDelay,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               fixedClock{},
	}
	b.Reset()
	base := b.NextBackOff()
	for i := 1; i < attempt && base < maxDelay; i++ {
		base = b.NextBackOff()
	}
	half := base / 2
	if j := p.jitter(base); j < maxDelay-half {
		return half + j
	}
	return maxDelay
}

// fixedClock keeps backoff.ExponentialBackOff from reading the wall clock.
type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Time{} }

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// idempotent reports whether req may be sent twice, by the same rule as
// net/http's transport: an idempotent method, or an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// What a server said of retrying its response: nothing, or a yes or a no
// in X-Should-Retry (OpenAI, Anthropic) or Stripe-Should-Retry.
const (
	shouldRetryUnsaid = iota
	shouldRetryYes
	shouldRetryNo
)

// shouldRetry reads X-Should-Retry, or else Stripe-Should-Retry: "true" or
// "false", in any case; anything else says nothing.
func shouldRetry(h http.Header) int {
	v := h.Get("X-Should-Retry")
	if v == "" {
		v = h.Get("Stripe-Should-Retry")
	}
	switch v = strings.TrimSpace(v); {
	case strings.EqualFold(v, "true"):
		return shouldRetryYes
	case strings.EqualFold(v, "false"):
		return shouldRetryNo
	}
	return shouldRetryUnsaid
}
