package middleware

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/egress-go/egress/throttle"
)

// Header names the middleware writes, besides Retry-After.
const (
	// HeaderRateLimit is the IETF RateLimit field: what is left of each
	// limit and when it is full again, as "bucket";r=5;t=1.
	HeaderRateLimit = "RateLimit"
	// HeaderRateLimitPolicy is the IETF RateLimit-Policy field: each
	// limit's quota and window, as "bucket";q=50;w=1.
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderDegraded says that the limiter could not enforce its limit:
	// "closed" on a 503 when Reserve failed (Redis unreachable under
	// FailClosed, or a limiter out of room for keys), "open" on a request
	// admitted while its store was down ([WithDegraded]). Alert on it.
	HeaderDegraded = "X-RateLimit-Degraded"
)

// canonical forms, for writing the header map directly.
var (
	keyRateLimit       = http.CanonicalHeaderKey(HeaderRateLimit)
	keyRateLimitPolicy = http.CanonicalHeaderKey(HeaderRateLimitPolicy)
	keyDegraded        = http.CanonicalHeaderKey(HeaderDegraded)
)

// Middleware enforces a [throttle.Limiter] on the requests of an HTTP
// server, and tells each client what is left of its budget. Build one
// with [New] (the zero value is not usable) and wrap your handler with
// [Middleware.Wrap]. A Middleware is safe for concurrent use.
type Middleware struct {
	limiter  throttle.Limiter
	quick    quick // limiter's allocation-free path, or nil
	key      KeyFunc
	fallback KeyFunc
	cost     func(*http.Request) int
	maxWait  time.Duration
	policies func(key string) *Policies
	own      *Policies // the limiter's own, when Describe knows it
	xStyle   ResetStyle
	down     func() bool
	now      func() time.Time
}

// New returns a Middleware that takes units of l for every request.
//
// By default, a request is keyed by its client's IP ([KeyByIP]), costs 1
// unit, and is refused at once with 429 Too Many Requests when its key's
// budget is spent. Every response, refusals included, carries the IETF
// RateLimit and RateLimit-Policy fields when the middleware knows l's
// limits (see [Describe] and [WithPolicies]); a refusal carries
// Retry-After, in whole seconds rounded up.
//
// New panics if l or an Option is nil.
func New(l throttle.Limiter, opts ...Option) *Middleware {
	if l == nil {
		panic("middleware: New given a nil Limiter")
	}
	m := &Middleware{limiter: l, key: KeyByIP(), fallback: KeyByIP(), now: time.Now}
	for i, o := range opts {
		if o == nil {
			panic("middleware: New given a nil Option (#" + strconv.Itoa(i) + ")")
		}
		o.apply(m)
	}
	if _, ok := describe(l); ok && m.policies == nil {
		m.own = Describe(l)
	}
	m.quick = quickOf(l)
	return m
}

// quick is the allocation-free path of throttle's own limiters: AllowN
// takes the units or refuses, and Inspect then tells what is left.
type quick interface {
	throttle.Allower
	throttle.Inspector
}

// quickOf returns l's quick path when l is one of throttle's own limiters
// and has one. (Goal: ≤ 2 allocations per request, where Reserve costs
// one.) Other limiters, redislimit's among them, do not take it: for them
// Inspect would be a second round trip.
func quickOf(l throttle.Limiter) quick {
	switch l.(type) {
	case *throttle.TokenBucket, *throttle.FixedWindow, *throttle.SlidingWindow, *throttle.SlidingWindowCounter:
		q, _ := l.(quick)
		return q
	}
	return nil
}

// Wrap returns a handler that limits the requests it passes to next.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if next == nil {
		panic("middleware: Wrap given a nil Handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.admit(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// admit takes r's units, writes the headers, and reports whether r may
// go on; when not, it has answered r.
func (m *Middleware) admit(w http.ResponseWriter, r *http.Request) bool {
	key, err := m.keyOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	n := 1
	if m.cost != nil {
		if n = m.cost(r); n < 1 {
			http.Error(w, "middleware: the cost of a request must be at least 1, got "+strconv.Itoa(n), http.StatusInternalServerError)
			return false
		}
	}
	ctx := r.Context()
	maxWait := m.maxWait
	if deadline, ok := ctx.Deadline(); ok && maxWait > 0 {
		maxWait = max(min(maxWait, time.Until(deadline)), 0)
	}
	o, err := m.take(ctx, key, n, maxWait)
	switch {
	case errors.Is(err, errEnded), err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The client went away, or its deadline comes before the slot:
		// the reservation was given back, or never made. The limiter
		// did decide: this is no degraded answer.
		http.Error(w, "middleware: the request ended while waiting for its slot", http.StatusServiceUnavailable)
		return false
	case err != nil:
		h := w.Header()
		h[keyDegraded] = []string{"closed"}
		h.Set("Retry-After", "1")
		http.Error(w, "middleware: the rate limiter could not decide; try again", http.StatusServiceUnavailable)
		return false
	}
	if in, ok := m.limiter.(throttle.Inspector); ok && o.tooBig {
		// The key's budget did not refuse it: its cost did. Said to be
		// at 0, a client following r=0 paused every request of the key
		// for nothing (found by a user reading the docs).
		if st, err := in.Inspect(ctx, key); err == nil {
			o.remaining = max(st.Remaining, 0)
		}
	}
	h := w.Header()
	m.writeHeaders(ctx, h, key, o)
	if !o.ok {
		refuse(w, h, o.delay)
		return false
	}
	if m.down != nil && m.down() {
		h[keyDegraded] = []string{"open"}
	}
	return true
}

// keyOf returns r's key: from the key func, else the fallback, else the
// shared unknown key.
func (m *Middleware) keyOf(r *http.Request) (string, error) {
	key, err := m.key(r)
	if missing(key, err) {
		if key, err = m.fallback(r); missing(key, err) {
			return unknownKey, nil
		}
	}
	if err != nil {
		return "", err
	}
	if len(key) > MaxKeyLen {
		return "", tooLong("the key", len(key))
	}
	return key, nil
}

// missing reports whether a key func found no usable key: none, or a
// malformed one. A key too long is not missing: it gets a 400.
func missing(key string, err error) bool {
	if err != nil {
		return !errors.Is(err, ErrKeyTooLong)
	}
	return key == ""
}

// outcome is what became of a request's units.
type outcome struct {
	ok        bool
	delay     time.Duration // when !ok: until the same request would be admitted
	remaining int
	tooBig    bool // refused: its cost is more than the limiter can ever grant at once
}

// errEnded reports that the request's context ended while it was held.
var errEnded = errors.New("middleware: request ended while held")

// take reserves n units of key's budget and, when their slot lies ahead,
// holds the request until it. It calls Reserve on the limiter's own type
// when that is one of throttle's, because that call inlines and keeps the
// Reservation on the stack (goal: ≤ 2 allocations per request; through
// the interface it costs one more).
func (m *Middleware) take(ctx context.Context, key string, n int, maxWait time.Duration) (outcome, error) {
	if m.quick != nil && maxWait == 0 {
		// On an error, Reserve below meets it again and answers it.
		if ok, err := m.quick.AllowN(ctx, key, n); err == nil && ok {
			// What is left right after: others may have taken some
			// meanwhile, or units returned; either way it is true now.
			st, err := m.quick.Inspect(ctx, key)
			if err != nil {
				return outcome{ok: true}, nil // 0 left: never untrue
			}
			return outcome{ok: true, remaining: st.Remaining}, nil
		}
		// Refused: Reserve says when to come back (and admits, if
		// units came back meanwhile).
	}
	switch l := m.limiter.(type) {
	case *throttle.TokenBucket:
		r, err := l.Reserve(ctx, key, n, maxWait)
		return settle(ctx, r, err)
	case *throttle.FixedWindow:
		r, err := l.Reserve(ctx, key, n, maxWait)
		return settle(ctx, r, err)
	case *throttle.SlidingWindow:
		r, err := l.Reserve(ctx, key, n, maxWait)
		return settle(ctx, r, err)
	}
	r, err := m.limiter.Reserve(ctx, key, n, maxWait)
	return settle(ctx, r, err)
}

func settle(ctx context.Context, r *throttle.Reservation, err error) (outcome, error) {
	switch {
	case errors.Is(err, throttle.ErrExceedsCapacity):
		return outcome{tooBig: true}, nil // refused, and waiting cannot help
	case err != nil:
		return outcome{}, err
	case !r.OK:
		return outcome{delay: r.Delay, remaining: r.Remaining}, nil
	}
	if r.Delay > 0 {
		if err := r.Wait(ctx); err != nil {
			return outcome{}, errEnded
		}
	}
	return outcome{ok: true, remaining: r.Remaining}, nil
}

// refuse answers 429 Too Many Requests. Retry-After is the delay in whole
// seconds, rounded up, so that a client that waits exactly that long is
// admitted; there is none when waiting cannot help.
func refuse(w http.ResponseWriter, h http.Header, delay time.Duration) {
	if delay > 0 {
		h.Set("Retry-After", strconv.FormatInt(ceilSeconds(delay), 10))
	}
	http.Error(w, "middleware: rate limit exceeded", http.StatusTooManyRequests)
}

// fieldValues holds the values of one response's headers and their bytes,
// in one allocation. (Goal: ≤ 2 allocations per request; a string and a
// []string per field would cost two each.) The bytes are never written
// once a string points into them.
type fieldValues struct {
	v [5]string
	b [112]byte
}

// writeHeaders writes the policy headers for key's units.
func (m *Middleware) writeHeaders(ctx context.Context, h http.Header, key string, o outcome) {
	p := m.own
	if m.policies != nil {
		p = m.policies(key)
	}
	if p == nil || len(p.limits) == 0 {
		return // a zero Policies, too, states nothing
	}
	var now time.Time
	if p.clocked || m.xStyle == ResetEpoch {
		now = m.now()
	}
	var buf [maxLimits]state
	ss := p.states(ctx, key, o.remaining, now, m.xStyle == ResetEpoch, buf[:0])

	f := new(fieldValues)
	b := p.appendField(f.b[:0], ss)
	ends := [4]int{len(b)}
	if m.xStyle != 0 {
		s := ss[binding(ss)]
		b = strconv.AppendInt(b, int64(p.limits[binding(ss)].size), 10)
		ends[1] = len(b)
		b = strconv.AppendInt(b, int64(s.remaining), 10)
		ends[2] = len(b)
		reset := ceilSeconds(s.reset)
		if m.xStyle == ResetEpoch {
			at := now.Add(s.reset)
			reset = at.Unix()
			if at.Nanosecond() > 0 {
				reset++
			}
		}
		b = strconv.AppendInt(b, reset, 10)
		ends[3] = len(b)
	}
	f.v[0] = unsafe.String(&b[0], ends[0])
	f.v[1] = p.field
	h[keyRateLimit] = f.v[0:1:1]
	h[keyRateLimitPolicy] = f.v[1:2:2]
	if m.xStyle != 0 {
		f.v[2] = unsafe.String(&b[ends[0]], ends[1]-ends[0])
		f.v[3] = unsafe.String(&b[ends[1]], ends[2]-ends[1])
		f.v[4] = unsafe.String(&b[ends[2]], ends[3]-ends[2])
		h["X-Ratelimit-Limit"] = f.v[2:3:3]
		h["X-Ratelimit-Remaining"] = f.v[3:4:4]
		h["X-Ratelimit-Reset"] = f.v[4:5:5]
	}
}
