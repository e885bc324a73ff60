package redislimit

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the script runs that callers start while maxSending
// callers' pipelines are on the wire together, in one pipeline: one round
// trip for many callers, each still one script run, so Redis reads and
// writes once for the lot. No goroutine of its own runs: a caller that
// finds fewer on the wire sends its own call, and when it is answered
// hands whatever queued meanwhile to the first caller in the queue, which
// sends it next.
//
// It exists for one bench goal (bench/micro BenchmarkRedisDecision, 64
// goroutines on one key, ≥ 0.9× redis_rate): each caller sending on its
// own reached 0.45×.
type batcher struct {
	pipe pipeliner // nil when the client cannot pipeline: no batching

	// mu guards sending, queue and each queued call's batch.
	mu      sync.Mutex
	sending int     // callers' calls or pipelines on the wire, at most maxSending
	queue   []*call // calls for the next pipeline
}

// maxSending is how many callers send at once before calls queue for a
// pipeline, so that Redis works on one while the client reads another.
// Speed only: Redis decisions/s ≥ 0.9× redis_rate (bench/micro
// RedisDecision): 16 paired passes gave medians 0.98× with 2, 0.85× with 1.
const maxSending = 2

// pipeliner is the optional interface through which the batcher sends a
// pipeline. redis.Scripter lacks it, but every go-redis client has it.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// maxBatch bounds the calls one pipeline carries.
const maxBatch = 64

// call is one script run waiting in a batch.
type call struct {
	ctx   context.Context
	bound time.Time // when the Client's timeout ends for it (see WithTimeout)
	keys  []string
	args  []any
	v     any
	err   error
	// wake gets one value: false once v and err are set, or true when
	// the call is to send batch, which it leads.
	wake  chan bool
	batch []*call
}

// do runs the script once for keys and args, bounded by ctx and by bound.
func (b *batcher) do(ctx context.Context, bound time.Time, s *script, rdb redis.Scripter, keys []string, args []any) (any, error) {
	if b.pipe == nil || !s.loaded.Load() {
		return runBounded(ctx, bound, s, rdb, keys, args)
	}
	b.mu.Lock()
	if b.sending < maxSending {
		b.sending++
		b.mu.Unlock()
		v, err := runBounded(ctx, bound, s, rdb, keys, args)
		b.handOn()
		return v, err
	}
	c := &call{ctx: ctx, bound: bound, keys: keys, args: args, wake: make(chan bool, 1)}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	// No timer of its own: the pipelines on the wire end by their own
	// calls' bounds, all earlier than c's, and the one that carries c by
	// the earliest bound among its calls (see run).
	select {
	case lead := <-c.wake:
		if lead {
			b.send(c.batch, s, rdb)
		}
		return c.v, c.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if i := slices.Index(b.queue, c); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		b.mu.Unlock()
		return nil, ctx.Err()
	}
	batch := c.batch
	b.mu.Unlock()
	if batch != nil {
		// c was made to lead the next pipeline as its context ended: the
		// others in it are counting on it.
		b.send(batch, s, rdb)
	}
	return nil, ctx.Err() // an answer still on the wire no longer matters
}

// send runs batch, whose first call sends it, answers the others, and
// hands the queue on.
func (b *batcher) send(batch []*call, s *script, rdb redis.Scripter) {
	b.run(batch, s, rdb)
	for _, c := range batch[1:] {
		c.wake <- false
	}
	b.handOn()
}

// handOn makes the first queued call lead the calls queued while a
// pipeline was on the wire, or frees the sender's place when none are.
func (b *batcher) handOn() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.sending--
		return
	}
	n := min(len(b.queue), maxBatch)
	next := slices.Clone(b.queue[:n])
	b.queue = slices.Delete(b.queue, 0, n)
	next[0].batch = next
	next[0].wake <- true
}

// run sets every call's answer: one script run, or a pipeline of them
// bounded by the earliest of their bounds, so that none is answered
// later than its own. A call whose context has ended, or whose bound
// has passed, is not sent.
func (b *batcher) run(batch []*call, s *script, rdb redis.Scripter) {
	live := make([]*call, 0, len(batch))
	var end time.Time
	now := time.Now()
	for _, c := range batch {
		if c.err = c.ctx.Err(); c.err != nil {
			continue
		}
		if !now.Before(c.bound) {
			c.err = context.DeadlineExceeded
			continue
		}
		live = append(live, c)
		if end.IsZero() || c.bound.Before(end) {
			end = c.bound
		}
	}
	if len(live) == 1 {
		c := live[0]
		c.v, c.err = runBounded(c.ctx, c.bound, s, rdb, c.keys, c.args)
		return
	}
	if len(live) == 0 {
		return
	}
	ctx, stop := context.WithDeadline(context.WithoutCancel(live[0].ctx), end)
	defer stop()
	p := b.pipe.Pipeline()
	cmds := make([]*redis.Cmd, len(live))
	for i, c := range live {
		cmds[i] = p.EvalSha(ctx, s.sha, c.keys, c.args...)
	}
	_, _ = p.Exec(ctx)
	for i, c := range live {
		c.v, c.err = cmds[i].Result()
		if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
			s.loaded.Store(false)
			c.v, c.err = runBounded(c.ctx, c.bound, s, rdb, c.keys, c.args)
		}
	}
}
