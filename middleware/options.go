package middleware

import (
	"fmt"
	"net/http"
	"time"
)

// An Option configures a [Middleware].
type Option interface {
	apply(*Middleware)
}

type optionFunc func(*Middleware)

func (f optionFunc) apply(m *Middleware) { f(m) }

// WithKey sets how each request's budget key is found. The default is
// [KeyByIP] with no trusted proxy.
func WithKey(f KeyFunc) Option {
	if f == nil {
		panic("middleware: WithKey given a nil KeyFunc")
	}
	return optionFunc(func(m *Middleware) { m.key = f })
}

// WithFallback sets the key of a request that the key func ([WithKey])
// cannot key: one without an API key, say, or with a malformed one. The
// default is [KeyByIP] with no trusted proxy. A request that the fallback
// cannot key either shares the key "ip:unknown" with every other such
// request: no request is ever let through unlimited.
func WithFallback(f KeyFunc) Option {
	if f == nil {
		panic("middleware: WithFallback given a nil KeyFunc")
	}
	return optionFunc(func(m *Middleware) { m.fallback = f })
}

// WithCost sets how many units of its key's budget each request takes.
// The default is 1. A request whose cost is above what the limiter can
// ever grant at once is refused with 429 and no Retry-After, since waiting
// cannot help; a cost below 1 is answered with 500. The headers count
// units, not requests: a client that follows them must weigh each
// request the same way (egress.WithCost), or it sends more than is left.
func WithCost(f func(r *http.Request) int) Option {
	if f == nil {
		panic("middleware: WithCost given a nil func")
	}
	return optionFunc(func(m *Middleware) { m.cost = f })
}

// WithMaxWait makes the middleware hold a request for up to d until its
// slot comes, instead of refusing it at once (the default, and what public
// APIs usually do). Internal services that would rather be slow than fail
// use it: the limiter then spaces the requests it holds, and refuses only
// those whose slot lies further than d ahead, or past the request's
// context deadline. A held request whose client goes away gives its slot
// back. d must be positive.
func WithMaxWait(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("middleware: WithMaxWait must be positive, got %v", d))
	}
	return optionFunc(func(m *Middleware) { m.maxWait = d })
}

// WithPolicies tells the middleware which limits hold each key, for the
// RateLimit and RateLimit-Policy headers, when its Limiter is one it
// cannot look into: a [throttle.Route] of plan tiers, a [throttle.All],
// or your own. policies returns the limits of key's tier, built with
// [Describe]; it must be fast and safe for concurrent use, so build each
// Policies once.
// When it returns nil (or a zero Policies), that response states no
// policy.
//
// Without it, a Limiter that [Describe] knows is described as it is, and
// any other gets no policy headers: only Retry-After on refusal, since the
// middleware states nothing it cannot stand behind.
func WithPolicies(policies func(key string) *Policies) Option {
	if policies == nil {
		panic("middleware: WithPolicies given a nil func")
	}
	return optionFunc(func(m *Middleware) { m.policies = policies })
}

// ResetStyle is how [WithXRateLimit] writes X-RateLimit-Reset.
type ResetStyle int

const (
	// ResetDelta writes the seconds until the reset, rounded up: "30".
	ResetDelta ResetStyle = iota + 1
	// ResetEpoch writes the reset as Unix epoch seconds, rounded up, as
	// GitHub and X do: "1767225600". Clients convert it with the
	// response's Date, which net/http's server sets.
	ResetEpoch
)

// WithXRateLimit adds the common X-RateLimit-Limit, X-RateLimit-Remaining
// and X-RateLimit-Reset fields to every response the policy headers are
// on, for clients that predate the IETF fields. There is no default style:
// clients read a small reset as a delta and a large one as an epoch, so
// the choice must be explicit. They describe one limit: the one with the
// fewest units left, and among those the latest reset.
func WithXRateLimit(reset ResetStyle) Option {
	if reset != ResetDelta && reset != ResetEpoch {
		panic(fmt.Sprintf("middleware: WithXRateLimit given an unknown ResetStyle %d", int(reset)))
	}
	return optionFunc(func(m *Middleware) { m.xStyle = reset })
}

// WithDegraded tells the middleware when its limiter's shared store is
// down, so that the requests it admits meanwhile (under redislimit's
// FailOpen, or Fallback to a local limiter) carry the header
// X-RateLimit-Degraded: open, which operators can alert on. down must be
// cheap: an atomic.Bool's Load, set from redislimit.WithObserver, say.
//
// A limiter that fails closed refuses with an error instead: those
// requests are answered 503 with X-RateLimit-Degraded: closed and
// Retry-After: 1 whether or not this option is set.
//
// The policy headers still state what the limiter returned: under
// Fallback, the local limiter's budget; under FailOpen, which reports
// nothing left, r=0, so an egress client pauses for t, which is cautious.
func WithDegraded(down func() bool) Option {
	if down == nil {
		panic("middleware: WithDegraded given a nil func")
	}
	return optionFunc(func(m *Middleware) { m.down = down })
}

// WithClock makes the middleware read the wall clock from now, for
// X-RateLimit-Reset epochs and fixed windows' resets. Tests use it; the
// limiter's own clock is set on the limiter.
func WithClock(now func() time.Time) Option {
	if now == nil {
		panic("middleware: WithClock given a nil func")
	}
	return optionFunc(func(m *Middleware) { m.now = now })
}
