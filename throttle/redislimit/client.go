package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/internal/nilcheck"
)

// channelSuffix follows the prefix in the name of the pause channel.
const channelSuffix = "pause"

// subscriber is the optional interface through which a Client subscribes
// to pauses. redis.Scripter lacks it, but every go-redis client has it.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Client is what the limiters on one Redis client share: the budget
// script, a circuit breaker, the observer, and the process's view of
// every key's pause, fed by one pub/sub subscription on the channel
// prefix+"pause" and by every script reply.
//
// Build one per Redis client with [NewClient] and hand it to each limiter
// with [WithClient]; Close it after them. A limiter built without
// WithClient builds a Client of its own.
//
// When rdb has no Subscribe method, the Client learns of pauses from
// replies only: a caller asleep in this process follows a pause made in
// another process only if this process calls Redis for the key again
// before the caller wakes.
//
// Pub/sub delivers at most once. A lost message about a pause is made up
// for by the next reply on the key, but the pushes of a [FixedWindow]
// (bookings that a pause moves past a full window's reset) travel only
// in the message and in the reply to the Pause itself: a process that
// misses the message wakes those sleepers at the uniform shift, up to a
// window early.
//
// A Client is safe for concurrent use.
type Client struct {
	rdb     redis.Scripter
	prefix  string
	timeout time.Duration
	frozen  *atomic.Int64 // test-only; see withFrozenTime
	script  *script
	batcher batcher
	// breaker guards every call outside a cluster; on a cluster client,
	// the calls whose node is not known (see breakerFor).
	breaker breaker
	// cluster is rdb as a cluster client, or nil; nodes holds a
	// *breaker per master's address, so that a dead node turns away only
	// the calls on its own slots.
	cluster masterFinder
	nodes   sync.Map
	pauses  pauses
	channel string
	// channelArg is channel as a script argument, boxed once. Speed only:
	// Redis decisions/s ≥ 0.9× redis_rate (bench/micro RedisDecision).
	channelArg any
	start      time.Time // origin of the local monotonic clock
	closed     atomic.Bool
	ps         *redis.PubSub // nil without Subscribe
	listened   chan struct{} // closed when the subscription's goroutine ends
	once       sync.Once
	grants     sync.Map // a shared queue's waiter id -> its *waiter; see queue.go
	learners   sync.Map // *Adaptive -> struct{}: what hears their changes; see adaptive.go
	settles    settles  // queued until a call carries them; see settle.go
}

// NewClient returns a Client for rdb. It takes [WithPrefix], [WithTimeout]
// and [WithObserver]; a nil rdb panics. It subscribes to the pause
// channel before it returns, when rdb can, so that pauses published once
// it returns are heard; when Redis is away the subscription is made once
// it is back.
func NewClient(rdb redis.Scripter, opts ...Option) (*Client, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := cfg.only(true, "NewClient"); err != nil {
		return nil, err
	}
	return newClient(rdb, cfg), nil
}

func newClient(rdb redis.Scripter, cfg config) *Client {
	if nilcheck.Is(rdb) {
		panic("redislimit: nil redis.Scripter")
	}
	c := &Client{
		rdb: rdb, prefix: cfg.prefix, timeout: cfg.timeout, frozen: cfg.frozen,
		script: newScript(), channel: cfg.prefix + channelSuffix, channelArg: cfg.prefix + channelSuffix,
		start: time.Now(), listened: make(chan struct{}),
	}
	c.breaker.observer, c.breaker.now = cfg.observer, c.now
	c.cluster, _ = rdb.(masterFinder)
	c.batcher.pipe, _ = rdb.(pipeliner)
	c.pauses.init(c.now)
	c.settles.init(c)
	sub, ok := rdb.(subscriber)
	if !ok {
		close(c.listened)
		return c
	}
	ctx, stop := context.WithTimeout(context.Background(), cfg.timeout)
	defer stop()
	c.ps = sub.Subscribe(ctx, c.channel)
	_, _ = c.ps.Receive(ctx) // the confirmation, or the outage
	go c.listen(c.ps.Channel())
	return c
}

func (c *Client) listen(ch <-chan *redis.Message) {
	defer close(c.listened)
	for m := range ch {
		if id, ok := strings.CutPrefix(m.Payload, grantMessage); ok {
			c.granted(id)
			continue
		}
		if change, ok := strings.CutPrefix(m.Payload, changeMessage); ok {
			c.changed(change)
			continue
		}
		c.pauses.hear(m.Payload)
	}
}

// Close sends the settles still queued (see [Client.Flush]), bounded by
// [WithTimeout], ends the subscription and waits for its goroutine; later
// calls through the Client fail with [ErrClosed], and so does a later
// Settle, which sends nothing. Its flush is tried even while the circuit
// breaker is open, since nothing will send those settles after it: a
// settle that still finds Redis away is dropped and reported to the
// [WithObserver] func. Reservations already handed out keep their
// slots. Close is idempotent.
func (c *Client) Close() error {
	var err error
	c.once.Do(func() {
		c.settles.mu.Lock()
		c.settles.closed = true // a Settle from now on is refused, not left queued
		c.settles.mu.Unlock()
		ctx, stop := context.WithTimeout(context.Background(), c.timeout)
		c.eachBreaker((*breaker).probeNow)
		err = c.Flush(ctx)
		stop()
		c.closed.Store(true)
		if c.ps != nil {
			err = errors.Join(err, c.ps.Close())
		}
		<-c.listened
	})
	return err
}

// now returns the local monotonic time in nanoseconds, or the frozen
// time in tests.
func (c *Client) now() int64 {
	if c.frozen != nil {
		return c.frozen.Load() * int64(time.Microsecond)
	}
	return int64(time.Since(c.start))
}

// wall returns the wall-clock time of now(): the clock a record of what
// the upstream states compares stated instants (epochs, HTTP-dates) with.
func (c *Client) wall() time.Time {
	if c.frozen != nil {
		return time.Unix(0, c.now())
	}
	return c.start.Add(time.Duration(c.now()))
}

// frozenMicros returns the scripts' frozen time argument: 0 in production.
func (c *Client) frozenMicros() int64 {
	if c.frozen == nil {
		return 0
	}
	return c.frozen.Load()
}

// run executes the budget script on the caller's goroutine, bounded by
// ctx and the Client's timeout (see [WithTimeout]), in one pipeline with
// the calls of other callers that start while one is on the wire. An error for which
// Redis, not the call, is to blame comes back as an *UnavailableError.
func (c *Client) run(ctx context.Context, keys []string, args []any) (any, error) {
	return c.runScript(ctx, c.script, keys, args)
}

// runScript is run for any of the package's scripts: s other than the
// budget script goes on its own, outside the batcher's pipelines.
func (c *Client) runScript(ctx context.Context, s *script, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	br := c.breakerFor(ctx, keys)
	if !br.admit() {
		return nil, &UnavailableError{Err: ErrUnavailable}
	}
	// The call's bound is a time, not a context of its own: the batcher
	// makes one context per round trip, for all the calls it carries.
	bound := time.Now().Add(c.timeout)
	if br.silentSince.Load() == 0 { // a read first: most calls find it set, or are answered
		br.silentSince.CompareAndSwap(0, max(int64(time.Since(c.start)), 1))
	}
	var v any
	var err error
	if s == c.script {
		v, err = c.batcher.do(ctx, bound, s, c.rdb, keys, args)
	} else {
		v, err = runBounded(ctx, bound, s, c.rdb, keys, args)
	}
	if err != nil && ctx.Err() != nil {
		// The caller gave up. Redis is to blame only once nothing it was
		// asked for a whole WithTimeout has been answered: a caller's
		// deadline shorter than that ends the call with the context's
		// error whether Redis is slow or gone. Left out, callers with
		// such deadlines each paid theirs for the whole outage, the
		// breaker never opened, and FailOpen never granted (found by a
		// user's test).
		if at := br.silentSince.Load(); at != 0 && time.Since(c.start)-time.Duration(at) >= c.timeout {
			br.failed(err)
		}
		return nil, ctx.Err()
	}
	if d, ok := ctx.Deadline(); ok && d.Before(bound) {
		bound = d
	}
	if err != nil && !time.Now().Before(bound) && !errors.Is(err, context.DeadlineExceeded) {
		// The client's own i/o deadline is the context's: say whose
		// (once: go-redis may have said it already).
		err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	if unavailable(err) {
		br.failed(err)
		return nil, &UnavailableError{Err: err}
	}
	if br.silentSince.Load() != 0 {
		br.silentSince.Store(0) // Redis answered
	}
	br.succeeded()
	if err != nil {
		return nil, fmt.Errorf("redislimit: script failed: %w", err)
	}
	return v, nil
}

// runBounded runs s once, on its own, bounded by ctx and by bound.
func runBounded(ctx context.Context, bound time.Time, s *script, rdb redis.Scripter, keys []string, args []any) (any, error) {
	if d, ok := ctx.Deadline(); !ok || bound.Before(d) {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, bound)
		defer stop()
	}
	return s.run(ctx, rdb, keys, args)
}
