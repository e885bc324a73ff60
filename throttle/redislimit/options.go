package redislimit

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts every Redis key and the pause channel unless
// [WithPrefix] says otherwise.
const DefaultPrefix = "egress:"

// DefaultTimeout bounds each call to Redis unless [WithTimeout] says
// otherwise.
const DefaultTimeout = 250 * time.Millisecond

// MaxPrefixLen is the longest prefix [WithPrefix] accepts.
const MaxPrefixLen = 256

// An Option configures a limiter or a [Listener] built by this package.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix    string
	policy    FailurePolicy
	timeout   time.Duration
	observer  func(Event)
	tolerance time.Duration
	offset    time.Duration
	listener  *Listener
	shift     *atomic.Int64 // test-only: moves the scripts' clock, in ns
}

// newConfig applies opts; rdb is checked here because every constructor
// calls it first.
func newConfig(rdb redis.Scripter, opts []Option) (config, error) {
	if rdb == nil {
		panic("redislimit: nil redis.Scripter")
	}
	c := config{prefix: DefaultPrefix, policy: FailClosed, timeout: DefaultTimeout}
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("redislimit: nil Option")
		}
		o.apply(&c)
	}
	switch {
	case strings.ContainsAny(c.prefix, "{}"):
		return c, fmt.Errorf("redislimit: WithPrefix must not contain '{' or '}', got %q", c.prefix)
	case len(c.prefix) > MaxPrefixLen:
		return c, fmt.Errorf("redislimit: WithPrefix of %d bytes is longer than MaxPrefixLen (%d)", len(c.prefix), MaxPrefixLen)
	case c.policy == nil:
		return c, fmt.Errorf("redislimit: WithFailurePolicy given a nil policy")
	case c.timeout <= 0:
		return c, fmt.Errorf("redislimit: WithTimeout must be positive, got %v", c.timeout)
	case c.tolerance < 0:
		return c, fmt.Errorf("redislimit: WithTolerance must not be negative, got %v", c.tolerance)
	case c.listener != nil && c.listener.channel != c.prefix+channelSuffix:
		return c, fmt.Errorf("redislimit: WithListener listens for prefix %q, not %q",
			strings.TrimSuffix(c.listener.channel, channelSuffix), c.prefix)
	}
	return c, nil
}

// WithPrefix sets the text every key and the pause channel start with
// (default [DefaultPrefix]). Processes share a budget when they use the
// same prefix, key and limit. It must not contain '{' or '}', which
// would break the hash tag that keeps a budget's keys in one cluster slot.
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) { c.prefix = p })
}

// WithFailurePolicy sets what Reserve does when Redis is unreachable, too
// slow or not ready: [FailClosed] (the default), [FailOpen] or
// [Fallback].
func WithFailurePolicy(p FailurePolicy) Option {
	return optionFunc(func(c *config) { c.policy = p })
}

// WithTimeout bounds every call to Redis, including Cancel and Pause
// (default [DefaultTimeout]). A call that runs out of time counts as
// Redis being unavailable. A go-redis client with ContextTimeoutEnabled
// bounds the call itself, on the caller's goroutine; any other client is
// called from a long-lived worker goroutine that the caller stops
// waiting for at the deadline.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.timeout = d })
}

// WithObserver has f called with every failed call to Redis and with
// every recovery. f runs on the caller's goroutine, with no lock held; it
// must be quick and safe for concurrent use.
func WithObserver(f func(Event)) Option {
	return optionFunc(func(c *config) { c.observer = f })
}

// WithTolerance keeps headroom against network and scheduling jitter, as
// [throttle.WithTolerance] does in process: a token bucket keeps
// ceil(d×rate) units of its burst in reserve (or lengthens its interval
// by d when the burst cannot spare them), a leaky bucket lengthens its
// interval by d, sliding windows treat their window as d longer, and a
// fixed window books nothing in the last d of each window.
func WithTolerance(d time.Duration) Option {
	return optionFunc(func(c *config) { c.tolerance = d })
}

// WithWindowOffset moves the boundaries of [FixedWindow] windows, which
// are otherwise aligned to the Unix epoch, as [throttle.WithWindowOffset]
// does. Other limiters ignore it.
func WithWindowOffset(d time.Duration) Option {
	return optionFunc(func(c *config) { c.offset = d })
}

// WithListener makes the limiter learn of pauses through l, which the
// caller owns and closes. Build one Listener per client and pass it to
// every limiter on that client, so that the process holds one
// subscription. Without it each limiter starts its own, closed by its
// Close. l must have been built with the same prefix.
func WithListener(l *Listener) Option {
	return optionFunc(func(c *config) { c.listener = l })
}

// withTimeShift moves the scripts' clock by the nanoseconds in p, for
// tests: time moves without sleeping. Production code never sets it.
func withTimeShift(p *atomic.Int64) Option {
	return optionFunc(func(c *config) { c.shift = p })
}
