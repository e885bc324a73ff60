package redislimit

import (
	"context"
	"sync"
	"time"
)

// workerIdle is about how long a worker waits for another call before it
// ends.
const workerIdle = time.Second

// workers run the scripts of a client that does not bound a call by its
// context's deadline, so that the caller can stop waiting at the timeout
// while the call goes on. They outlive a call: a goroutine started per
// call would cost more than the call's own work on the client side, most
// of it growing the new goroutine's stack to go-redis's depth each time.
// There are as many as there are calls at once, and each ends once idle
// for about workerIdle, or at close.
type workers struct {
	tasks chan *task    // unbuffered: a send succeeds only when a worker waits
	quit  chan struct{} // closed by stop
	wg    sync.WaitGroup
}

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

func (w *workers) init() {
	w.tasks = make(chan *task)
	w.quit = make(chan struct{})
}

// hand gives t to an idle worker, or to a new one when none is idle.
func (c *core) hand(t *task) {
	select {
	case c.workers.tasks <- t:
	default:
		c.workers.wg.Add(1)
		go c.work(t)
	}
}

// work runs t, then whatever other tasks come until a whole tick of
// workerIdle passes without one, or the core closes: it ends after
// between one and two workerIdle idle, and resets no timer per task. Each
// task is a call that run counted in c.wg.
func (c *core) work(t *task) {
	defer c.workers.wg.Done()
	tick := time.NewTicker(workerIdle)
	defer tick.Stop()
	busy := true
	for {
		if t != nil {
			v, err := c.eval(t.ctx, t.keys, t.args)
			t.done <- result{v, err}
			c.wg.Done()
			busy = true
		}
		select {
		case t = <-c.workers.tasks:
		case <-tick.C:
			if !busy {
				return
			}
			busy, t = false, nil
		case <-c.workers.quit:
			return
		}
	}
}

// stop ends every worker once the calls in flight are over.
func (w *workers) stop() {
	close(w.quit)
	w.wg.Wait()
}
