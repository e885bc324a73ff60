package redislimit

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
)

//go:embed budget.lua
var budgetSource string

// core is what the limiters built on one client share: the client, the
// options, the circuit breaker, the pause listener and the calls in
// flight.
type core struct {
	rdb    redis.Scripter
	script *redis.Script
	cfg    config
	br     breaker
	lis    *Listener
	ownLis bool

	// mu guards closed, and orders wg.Add against Close's wg.Wait.
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup // calls still running against Redis
}

// newCore starts the listener unless cfg has one; callers check
// everything that can fail first.
func newCore(rdb redis.Scripter, cfg config) *core {
	c := &core{rdb: rdb, script: redis.NewScript(budgetSource), cfg: cfg, lis: cfg.listener}
	c.br.observer = cfg.observer
	if c.lis == nil {
		c.lis = newListener(rdb, cfg)
		c.ownLis = true
	}
	return c
}

// close waits for calls in flight and closes the listener if it is ours.
func (c *core) close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
	if c.ownLis {
		return c.lis.Close()
	}
	return nil
}

type result struct {
	v   any
	err error
}

// run executes the budget script, bounded by the timeout whether or not
// the client honours context deadlines: the call runs on its own
// goroutine, which close waits for. An error for which Redis cannot be
// blamed on the call comes back as an *UnavailableError.
func (c *core) run(ctx context.Context, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.br.admit() {
		return nil, &UnavailableError{Err: ErrUnavailable}
	}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return nil, ErrClosed
	}
	c.wg.Add(1)
	c.mu.RUnlock()

	tctx, stop := context.WithTimeout(ctx, c.cfg.timeout)
	defer stop()
	done := make(chan result, 1)
	go func() {
		defer c.wg.Done()
		v, err := c.script.Run(tctx, c.rdb, keys, args...).Result()
		done <- result{v, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-tctx.Done():
		r.err = tctx.Err()
	}
	if r.err != nil && ctx.Err() != nil {
		return nil, ctx.Err() // the caller gave up; Redis is not to blame
	}
	if unavailable(r.err) {
		c.br.failed(r.err)
		return nil, &UnavailableError{Err: r.err}
	}
	c.br.succeeded()
	if r.err != nil {
		return nil, fmt.Errorf("redislimit: script failed: %w", r.err)
	}
	return r.v, nil
}

// now returns the test-only clock shift in microseconds.
func (c *core) shift() int64 {
	if c.cfg.shift == nil {
		return 0
	}
	return c.cfg.shift.Load() / int64(time.Microsecond)
}

// spec is one limit as the script sees it: an algorithm, four integer
// parameters (microseconds for times) and the key suffix that names it.
type spec struct {
	algo       string
	x, y, z, w int64
	suffix     string
	most       int // the most units one call can get
}

// keys returns the pause key and each part's key for key.
func keys(prefix, key string, specs []spec) ([]string, error) {
	switch {
	case key == "" || key[0] == '}':
		return nil, fmt.Errorf("redislimit: key must be non-empty and not start with '}', got %q", key)
	case len(key) > throttle.MaxKeyLen:
		return nil, fmt.Errorf("redislimit: key of %d bytes is longer than throttle.MaxKeyLen (%d)", len(key), throttle.MaxKeyLen)
	}
	tag := prefix + "{" + key + "}:"
	ks := make([]string, 1, 1+len(specs))
	ks[0] = tag + "pause"
	for _, s := range specs {
		ks = append(ks, tag+s.suffix)
	}
	return ks, nil
}

// args returns the script's arguments up to the op's own.
func (c *core) args(op string, specs []spec, extra int) []any {
	a := make([]any, 0, 3+5*len(specs)+extra)
	a = append(a, op, c.shift(), len(specs))
	for _, s := range specs {
		a = append(a, s.algo, s.x, s.y, s.z, s.w)
	}
	return a
}

// micros converts d to whole microseconds, rounding up.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// maxMicros bounds every span a script adds up, so that sums of a few of
// them stay exact in Lua's doubles (2^53) on top of the Unix time.
const maxMicros = 1 << 50

func checkSpan(field string, n int, d time.Duration) (int64, error) {
	us := micros(d)
	if us <= 0 || n < 0 || us > maxMicros/max(int64(n), 1) {
		return 0, fmt.Errorf("redislimit: %s of %d × %v is out of range", field, n, d)
	}
	return us, nil
}

// integer checks that v is an integer reply.
func integer(v any, what string) (int64, error) {
	i, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("redislimit: unexpected reply: %s is %T, want an integer", what, v)
	}
	return i, nil
}

// text checks that v is a string reply.
func text(v any, what string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("redislimit: unexpected reply: %s is %T, want a string", what, v)
	}
	return s, nil
}

// array checks that v is an array reply of at least n values.
func array(v any, n int, what string) ([]any, error) {
	a, ok := v.([]any)
	if !ok || len(a) < n {
		return nil, fmt.Errorf("redislimit: unexpected reply to %s: %T of %d values, want at least %d", what, v, len(a), n)
	}
	return a, nil
}
