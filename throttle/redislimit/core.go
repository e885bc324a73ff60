package redislimit

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	sha    string      // of budgetSource
	loaded atomic.Bool // Redis has answered an EVAL or EVALSHA of the script
	direct bool        // rdb bounds a call by its context's deadline
	cfg    config
	br     breaker
	lis    *Listener
	ownLis bool

	workers workers

	// mu guards closed, and orders wg.Add against Close's wg.Wait.
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup // calls still running against Redis
}

// newCore starts the listener unless cfg has one; callers check
// everything that can fail first.
func newCore(rdb redis.Scripter, cfg config) *core {
	sum := sha1.Sum([]byte(budgetSource))
	c := &core{rdb: rdb, sha: hex.EncodeToString(sum[:]), direct: honoursDeadline(rdb), cfg: cfg, lis: cfg.listener}
	c.br.observer = cfg.observer
	c.workers.init(rdb)
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
	c.workers.stop()
	if c.ownLis {
		return c.lis.Close()
	}
	return nil
}

// run executes the budget script, bounded by the timeout whether or not
// the client honours context deadlines: a client that does (go-redis with
// ContextTimeoutEnabled) is called on the caller's goroutine, any other
// on one of the core's workers, which the caller stops waiting for at the
// deadline and close waits for. An error for which Redis cannot be
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
	var r result
	if c.direct {
		r.v, r.err = c.eval(tctx, keys, args)
		c.wg.Done()
		// The client's i/o deadline is the context's, and may pass a
		// moment before the context's timer fires: wait for it, so that
		// the error says whose deadline it was, as on a worker.
		if d, _ := tctx.Deadline(); r.err != nil && !time.Now().Before(d) {
			<-tctx.Done()
			r.err = tctx.Err()
		}
	} else {
		t := &task{ctx: tctx, keys: keys, args: args, done: make(chan result, 1)}
		c.hand(t)
		select {
		case r = <-t.done:
		case <-tctx.Done():
			r.err = tctx.Err()
		}
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

// eval runs the script with EVALSHA once Redis is known to have it, and
// with EVAL until then or after a NOSCRIPT (a flush, a restart or a
// failover), which loads it again. So the calls a process starts at once
// each run the script once, rather than each failing with NOSCRIPT first.
func (c *core) eval(ctx context.Context, keys []string, args []any) (any, error) {
	if c.loaded.Load() {
		v, err := c.rdb.EvalSha(ctx, c.sha, keys, args...).Result()
		if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return v, err
		}
		c.loaded.Store(false)
	}
	v, err := c.rdb.Eval(ctx, budgetSource, keys, args...).Result()
	if err == nil {
		c.loaded.Store(true)
	}
	return v, err
}

// honoursDeadline reports whether rdb is a go-redis client that bounds
// every call, retries included, by its context's deadline.
func honoursDeadline(rdb redis.Scripter) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
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
	// One string holds every key, back to back; each is a slice of it.
	tag := len(prefix) + len("{") + len(key) + len("}:")
	size := tag + len(pauseSuffix)
	for _, s := range specs {
		size += tag + len(s.suffix)
	}
	var b strings.Builder
	b.Grow(size)
	put := func(suffix string) int {
		b.WriteString(prefix)
		b.WriteByte('{')
		b.WriteString(key)
		b.WriteString("}:")
		b.WriteString(suffix)
		return tag + len(suffix)
	}
	ends := make([]int, 0, 4)
	ends = append(ends, put(pauseSuffix))
	for _, s := range specs {
		ends = append(ends, ends[len(ends)-1]+put(s.suffix))
	}
	all := b.String()
	ks := make([]string, len(ends))
	from := 0
	for i, end := range ends {
		ks[i], from = all[from:end], end
	}
	return ks, nil
}

// pauseSuffix names a key's pause state.
const pauseSuffix = "pause"

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
