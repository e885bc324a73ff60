package metriclabel

import (
	"sync"
	"sync/atomic"

	"github.com/egress-go/egress/throttle/redislimit"
)

// breakers tracks which circuit breakers are open, of every Client whose
// [redislimit.WithObserver] func came from [Core.RedisObserver]: a
// Client has one breaker, or on a Redis Cluster one per master node.
type breakers struct {
	funcs atomic.Uint64 // funcs made, each standing for one Client

	// mu guards open, which holds the breakers open now.
	mu   sync.Mutex
	open map[breaker]struct{}
}

// breaker names one circuit breaker: the func that heard of it, and the
// node it guards ("" off a cluster).
type breaker struct {
	fn   uint64
	node string
}

func (b *breakers) set(k breaker, open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !open {
		delete(b.open, k)
		return
	}
	if b.open == nil {
		b.open = make(map[breaker]struct{})
	}
	b.open[k] = struct{}{}
}

// BreakerOpen reports whether any circuit breaker heard of through
// [Core.RedisObserver] is open: Redis, or one of its cluster's nodes, is
// failing.
func (c *Core) BreakerOpen() bool {
	c.breakers.mu.Lock()
	defer c.breakers.mu.Unlock()
	return len(c.breakers.open) > 0
}

// RedisObserver returns a func for [redislimit.WithObserver] that calls
// failed on each failed call to Redis, recovered when Redis answers
// again, and dropped with the number of settles dropped, then passes the
// event on to next, if next is not nil. It tracks each breaker's state
// for [Core.BreakerOpen], node by node: a drop of settles says nothing
// of the breaker, and on a cluster one node's recovery does not close
// another's breaker.
func (c *Core) RedisObserver(next func(redislimit.Event), failed, recovered func(), dropped func(n int)) func(redislimit.Event) {
	fn := c.breakers.funcs.Add(1)
	return func(e redislimit.Event) {
		switch {
		case e.Settles > 0:
			dropped(e.Settles)
		case e.Recovered:
			c.breakers.set(breaker{fn, e.Node}, false)
			recovered()
		case e.Err != nil:
			c.breakers.set(breaker{fn, e.Node}, true)
			failed()
		}
		if next != nil {
			next(e)
		}
	}
}
