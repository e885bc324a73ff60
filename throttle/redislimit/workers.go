package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// workerIdle is about how long a worker waits for another call before it
// ends.
const workerIdle = time.Second

// workers run the scripts of a client that does not bound a call by its
// context's deadline, so that the caller can stop waiting at the timeout
// while the call goes on. They outlive a call: a goroutine started per
// call would cost more than the call's own work on the client side, most
// of it growing the new goroutine's stack to go-redis's depth each time.
// A call goes to an idle worker, else starts one until inFlight are
// busy, else queues for a busy one, which sends what queued while it was
// busy in one pipeline (one round trip, each call still one script). Each ends once idle for
// about workerIdle, or at close.
type workers struct {
	tasks chan *task    // unbuffered: a send succeeds only when a worker waits
	queue chan *task    // tasks for the next pipeline of a busy worker
	quit  chan struct{} // closed by stop
	wg    sync.WaitGroup
	live  atomic.Int64 // workers that will still take a queued task
	idle  time.Duration
	pipe  pipeliner // nil when the client cannot pipeline
}

// pipeliner is the optional interface through which a worker sends the
// tasks that queued while it was busy in one round trip. Every go-redis
// client has it.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// maxBatch bounds the tasks one pipeline carries.
const maxBatch = 64

// inFlight is how many workers a busy client keeps before calls queue
// for a pipeline: while one waits for its replies, another gathers the
// next batch, so neither Redis nor the client sits idle.
const inFlight = 4

// task is one script run handed to a worker.
type task struct {
	ctx  context.Context
	keys []string
	args []any
	done chan result // buffered, so a worker never waits for its caller
}

type result struct {
	v   any
	err error
}

func (w *workers) init(rdb redis.Scripter) {
	w.tasks = make(chan *task)
	w.queue = make(chan *task, maxBatch)
	w.quit = make(chan struct{})
	w.idle = workerIdle
	w.pipe, _ = rdb.(pipeliner)
}

// hand gives t to an idle worker, or starts a new one while fewer than
// inFlight live, or queues t for a busy one's next pipeline; it starts a
// worker too when the queue is full.
func (c *core) hand(t *task) {
	select {
	case c.workers.tasks <- t:
		return
	default:
	}
	if c.workers.pipe != nil && c.loaded.Load() && c.workers.live.Load() >= inFlight {
		select {
		case c.workers.queue <- t:
			if c.workers.live.Load() == 0 {
				c.spawn(nil) // the last worker ended before it saw t
			}
			return
		default:
		}
	}
	c.spawn(t)
}

// spawn starts a worker on t, or on the queue when t is nil.
func (c *core) spawn(t *task) {
	c.workers.wg.Add(1)
	c.workers.live.Add(1)
	go c.work(t)
}

// work runs t, then whatever other tasks come until a whole tick of
// workerIdle passes without one, or the core closes: it ends after
// between one and two workerIdle idle, and resets no timer per task. Each
// task is a call that run counted in c.wg.
func (c *core) work(t *task) {
	defer c.workers.wg.Done()
	tick := time.NewTicker(c.workers.idle)
	defer tick.Stop()
	busy := true
	batch := make([]*task, 0, maxBatch)
	for {
		if t != nil {
			batch = append(batch[:0], t)
		drain:
			for len(batch) < maxBatch {
				select {
				case q := <-c.workers.queue:
					batch = append(batch, q)
				default:
					break drain
				}
			}
			c.runBatch(batch)
			clear(batch)
			busy = true
		}
		select {
		case t = <-c.workers.tasks:
		case t = <-c.workers.queue:
		case <-tick.C:
			t = nil
			if busy {
				busy = false
				continue
			}
			// Ending: a task queued before live drops is taken here, one
			// queued after it starts a worker of its own (see hand).
			c.workers.live.Add(-1)
			select {
			case t = <-c.workers.queue:
				c.workers.live.Add(1)
			default:
				return
			}
		case <-c.workers.quit:
			c.workers.live.Add(-1)
			return
		}
	}
}

// stop ends every worker once the calls in flight are over.
func (w *workers) stop() {
	close(w.quit)
	w.wg.Wait()
}

// runBatch runs the tasks, several in one pipeline, and answers each.
// A task whose caller has given up is not run.
func (c *core) runBatch(batch []*task) {
	live := batch[:0:0]
	for _, t := range batch {
		if err := t.ctx.Err(); err != nil {
			c.answer(t, nil, err)
			continue
		}
		live = append(live, t)
	}
	if len(live) == 1 || (len(live) > 1 && c.workers.pipe == nil) {
		for _, t := range live {
			v, err := c.eval(t.ctx, t.keys, t.args)
			c.answer(t, v, err)
		}
		return
	}
	if len(live) == 0 {
		return
	}
	// The pipeline runs until the latest deadline, whichever caller
	// gives up; each caller stops waiting at its own.
	var end time.Time
	for _, t := range live {
		if d, _ := t.ctx.Deadline(); d.After(end) {
			end = d
		}
	}
	ctx, stop := context.WithDeadline(context.WithoutCancel(live[0].ctx), end)
	defer stop()
	p := c.workers.pipe.Pipeline()
	cmds := make([]*redis.Cmd, len(live))
	for i, t := range live {
		cmds[i] = p.EvalSha(ctx, c.sha, t.keys, t.args...)
	}
	_, _ = p.Exec(ctx)
	for i, t := range live {
		v, err := cmds[i].Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			c.loaded.Store(false)
			v, err = c.eval(t.ctx, t.keys, t.args)
		}
		c.answer(t, v, err)
	}
}

// answer hands a task's result to its caller and ends the call.
func (c *core) answer(t *task, v any, err error) {
	t.done <- result{v, err}
	c.wg.Done()
}
