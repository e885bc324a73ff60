package redislimit

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultPrefix starts every Redis key and the pause channel unless
// [WithPrefix] says otherwise.
const DefaultPrefix = "egress:"

// DefaultTimeout bounds each call to Redis unless [WithTimeout] says
// otherwise.
const DefaultTimeout = 250 * time.Millisecond

// MaxPrefixLen is the longest prefix [WithPrefix] accepts.
const MaxPrefixLen = 256

// An Option configures a [Client] or a limiter built by this package.
// [WithPrefix], [WithTimeout] and [WithObserver] configure the Client: a
// limiter given [WithClient] takes them from that Client instead, and
// refuses them. The other options configure one limiter.
type Option interface {
	apply(*config)
}

// option is an Option with the name its errors use.
type option struct {
	name   string
	client bool // it configures the Client, not a limiter
	set    func(*config)
}

func (o option) apply(c *config) {
	c.set = append(c.set, o)
	o.set(c)
}

type config struct {
	set []option // in the order given

	// The Client's.
	prefix   string
	timeout  time.Duration
	observer func(Event)
	frozen   *atomic.Int64 // test-only: the scripts' time, in µs; 0 reads TIME

	// The limiter's.
	client    *Client
	policy    FailurePolicy
	tolerance time.Duration
	offset    time.Duration
	queue     queueConfig // NewQueue's; see queue.go

	slotLease time.Duration // see slotlease.go
	stated    string        // WithStated's unit; see stated.go
}

// newConfig applies opts. A nil Option is a programmer error and panics,
// as in every package of the module.
func newConfig(opts []Option) (config, error) {
	c := config{prefix: DefaultPrefix, policy: FailClosed, timeout: DefaultTimeout}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("redislimit: Option %d is nil", i))
		}
		o.apply(&c)
	}
	switch {
	case strings.ContainsAny(c.prefix, "{}"):
		return c, fmt.Errorf("redislimit: WithPrefix must not contain '{' or '}', got %q", c.prefix)
	case len(c.prefix) > MaxPrefixLen:
		return c, fmt.Errorf("redislimit: WithPrefix of %d bytes is longer than MaxPrefixLen (%d)", len(c.prefix), MaxPrefixLen)
	case c.timeout <= 0:
		return c, fmt.Errorf("redislimit: WithTimeout must be positive, got %v", c.timeout)
	case c.tolerance < 0:
		return c, fmt.Errorf("redislimit: WithTolerance must not be negative, got %v", c.tolerance)
	}
	if m, ok := c.policy.(FailMode); ok && m != FailClosed && m != FailOpen && m != FailShare {
		return c, fmt.Errorf("redislimit: WithFailurePolicy given %v, which is not FailClosed, FailOpen or FailShare", m)
	}
	return c, nil
}

// only returns an error naming the first option whose kind is not want.
func (c config) only(client bool, what string) error {
	for _, o := range c.set {
		if o.client != client {
			return fmt.Errorf("redislimit: %s does not take %s", what, o.name)
		}
	}
	return nil
}

// WithPrefix sets the text every key and the pause channel start with
// (default [DefaultPrefix]). Processes share a budget when they use the
// same prefix, key and limit. It must not contain '{' or '}', which
// would break the hash tag that keeps a budget's keys in one cluster slot.
func WithPrefix(p string) Option {
	return option{"WithPrefix", true, func(c *config) { c.prefix = p }}
}

// WithTimeout bounds every call to Redis, including Cancel and Pause
// (default [DefaultTimeout]). A call that runs out of time counts as
// Redis being unavailable. A call whose context ends first returns the
// context's error, since a slow reply and none look alike then; once
// Redis has answered nothing for a whole WithTimeout, such a call counts
// as unavailable too, so that callers with short deadlines meet the
// failure policy rather than each paying its deadline for an outage.
//
// The call runs on the caller's goroutine under a context with this
// timeout. A go-redis client bounds its network reads and writes by that
// context only when it is built with ContextTimeoutEnabled; any other
// client gives up at its own ReadTimeout and WriteTimeout (3 s by
// default), times its MaxRetries. Waiting for a pooled connection is
// always bounded by the context. Build the client with
// ContextTimeoutEnabled: true, or with read and write timeouts no longer
// than this one.
//
// Calls that start while another caller's is on the wire go together in
// one pipeline, which the first of them sends. The pipeline is bounded by
// the earliest of its calls' timeouts, so that no call in it waits longer
// than its own; a caller whose context ends sooner gives up at once,
// except the one sending the pipeline, which waits for it.
func WithTimeout(d time.Duration) Option {
	return option{"WithTimeout", true, func(c *config) { c.timeout = d }}
}

// WithObserver has f called with every failed call to Redis and with
// every recovery. f runs on the caller's goroutine, with no lock held; it
// must be quick and safe for concurrent use. A nil f panics.
func WithObserver(f func(Event)) Option {
	if f == nil {
		panic("redislimit: WithObserver given a nil func")
	}
	return option{"WithObserver", true, func(c *config) { c.observer = f }}
}

// WithClient has the limiter use c, and so share c's circuit breaker,
// pause subscription and observer with every other limiter on c. The
// caller owns c and closes it after the limiters. Without WithClient a
// limiter builds a Client of its own, which its Close closes.
func WithClient(c *Client) Option {
	if c == nil {
		panic("redislimit: WithClient given a nil Client")
	}
	return option{"WithClient", false, func(cfg *config) { cfg.client = c }}
}

// WithFailurePolicy sets what Reserve does when Redis is unreachable, too
// slow or not ready: [FailClosed] (the default), [FailOpen] or
// [Fallback], or, for a limiter given [WithSlotLease], [FailShare]: the
// process's share of the limit, once the units it holds are spent. A nil
// policy panics.
func WithFailurePolicy(p FailurePolicy) Option {
	if p == nil {
		panic("redislimit: WithFailurePolicy given a nil FailurePolicy")
	}
	return option{"WithFailurePolicy", false, func(c *config) { c.policy = p }}
}

// WithTolerance keeps headroom against network and scheduling jitter, as
// [throttle.WithTolerance] does in process:
//   - a token bucket keeps ceil(d×rate) whole units of its burst in
//     reserve (in process, d itself out of the burst's span), or
//     lengthens its interval by d when the burst cannot spare them;
//   - a leaky bucket does the same with its capacity;
//   - sliding windows treat their window as d longer;
//   - a fixed window still books in the last d of each window, but a
//     unit booked there counts against the next window too, so that the
//     upstream's window holds at most limit whichever side of the reset
//     the request lands on.
func WithTolerance(d time.Duration) Option {
	return option{"WithTolerance", false, func(c *config) { c.tolerance = d }}
}

// WithWindowOffset moves the boundaries of [FixedWindow] windows, which
// are otherwise aligned to the Unix epoch, as [throttle.WithWindowOffset]
// does. Other limiters ignore it.
func WithWindowOffset(d time.Duration) Option {
	return option{"WithWindowOffset", false, func(c *config) { c.offset = d }}
}

// withFrozenTime has the scripts use the microseconds in p as the
// server's time, and the Client's local clock follow them, for tests:
// time stands still until the test moves it. Production code never sets
// it; 0 in p reads the server's TIME.
func withFrozenTime(p *atomic.Int64) Option {
	return option{"withFrozenTime", true, func(c *config) { c.frozen = p }}
}
