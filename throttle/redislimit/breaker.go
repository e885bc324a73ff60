package redislimit

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ProbeInterval is how often an open circuit breaker lets one call
// through to see whether Redis is back.
const ProbeInterval = 250 * time.Millisecond

// Event is what [WithObserver] hears: a call to Redis that failed, the
// first call that succeeded after failures, or settles dropped.
//
// An Event with Settles 0 comes from the circuit breaker: Err set, Redis
// is failing and the breaker of Node is open until an Event with
// Recovered. An Event with Settles above 0 says only that settles were
// dropped, and nothing of the breaker: no recovery follows it.
type Event struct {
	// Err is the failure; nil on recovery.
	Err error
	// Settles is how many settles of a key (the units a request gives
	// back or is charged once its actual cost is known) were dropped,
	// because Redis did not answer them in time, answered them with an
	// error, or the Client closed first; 0 for the breaker's events.
	Settles int
	// Recovered is true when Redis answered again after failing.
	Recovered bool
	// Down is how long Redis has been failing: since the first failure
	// of this outage, up to now or up to the recovery.
	Down time.Duration
	// Node is the address of the cluster node whose calls failed or
	// recovered, on a Redis Cluster client; "" otherwise, and for a
	// call whose node was not known.
	Node string
}

// breaker stops an outage from costing a timeout on every call: after a
// failure it turns calls away, except one probe every ProbeInterval.
//
// A Client has one, or on a Redis Cluster one per master node (see
// [Client.breakerFor]), so that a dead node does not turn away the keys
// of the nodes that answer.
type breaker struct {
	observer func(Event)
	now      func() int64 // local monotonic nanoseconds
	node     string       // the node's address, on a cluster

	// silentSince is when a call began that Redis has not answered since,
	// on the Client's local monotonic clock (time since start), or 0: a
	// reply of any kind clears it. See runScript.
	silentSince atomic.Int64

	// shut mirrors open, so that calls while Redis answers take no lock.
	// Speed only: Redis decisions/s ≥ 0.9× redis_rate (bench/micro
	// RedisDecision), whose 64 callers would meet on mu twice a call.
	shut atomic.Bool

	// mu guards the fields below.
	mu      sync.Mutex
	open    bool
	since   int64 // first failure of the outage
	probeAt int64 // when the last call or probe failed or started
}

// admit reports whether a call may go to Redis now.
func (b *breaker) admit() bool {
	if !b.shut.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true
	}
	now := b.now()
	if now-b.probeAt < int64(ProbeInterval) {
		return false
	}
	b.probeAt = now
	return true
}

// probeNow lets the next call through as a probe, even if the last one
// failed less than ProbeInterval ago.
func (b *breaker) probeNow() {
	b.mu.Lock()
	b.probeAt = b.now() - int64(ProbeInterval)
	b.mu.Unlock()
}

// succeeded records a call that Redis answered.
func (b *breaker) succeeded() {
	if !b.shut.Load() {
		return
	}
	b.mu.Lock()
	if !b.open {
		b.mu.Unlock()
		return
	}
	b.open = false
	b.shut.Store(false)
	down := time.Duration(b.now() - b.since)
	b.mu.Unlock()
	b.notify(Event{Recovered: true, Down: down, Node: b.node})
}

// failed records a call that Redis could not answer.
func (b *breaker) failed(err error) {
	b.mu.Lock()
	now := b.now()
	if !b.open {
		b.open, b.since = true, now
		b.shut.Store(true)
	}
	b.probeAt = now
	down := time.Duration(now - b.since)
	b.mu.Unlock()
	b.notify(Event{Err: err, Down: down, Node: b.node})
}

func (b *breaker) notify(e Event) {
	if b.observer != nil {
		b.observer(e)
	}
}

// masterFinder is the optional interface of a Redis Cluster client,
// through which a Client finds the node a call goes to.
type masterFinder interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
}

// breakerFor returns the breaker of the node that serves keys: on a
// cluster client, the one of the master of keys[0]'s slot (every key of
// a call shares that slot); otherwise, or when the cluster's layout is
// not known, the Client's one breaker.
func (c *Client) breakerFor(ctx context.Context, keys []string) *breaker {
	if c.cluster == nil || len(keys) == 0 {
		return &c.breaker
	}
	node, err := c.cluster.MasterForKey(ctx, keys[0])
	if err != nil {
		return &c.breaker
	}
	addr := node.Options().Addr
	if b, ok := c.nodes.Load(addr); ok {
		return b.(*breaker)
	}
	b, _ := c.nodes.LoadOrStore(addr, &breaker{observer: c.breaker.observer, now: c.now, node: addr})
	return b.(*breaker)
}

// eachBreaker calls f on every breaker of the Client.
func (c *Client) eachBreaker(f func(*breaker)) {
	f(&c.breaker)
	c.nodes.Range(func(_, b any) bool {
		f(b.(*breaker))
		return true
	})
}

// cannotServe are the error prefixes by which a Redis server says that it
// cannot serve now, whatever the call: a replica after a failover, a
// server loading its data or that lost its master, a cluster that is
// down or resharding, a server stuck in a long script, without enough
// replicas, failing to persist or out of memory. MOVED and ASK are not
// among them: the cluster client follows those.
var cannotServe = [...]string{"READONLY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "NOREPLICAS", "MISCONF", "OOM"}

// unavailable reports whether err means Redis could not decide, as
// opposed to a reply that says the call itself was wrong.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrClosed),
		errors.Is(err, redis.ErrPoolTimeout),
		errors.As(err, &netErr):
		return true
	}
	for _, prefix := range cannotServe {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}
