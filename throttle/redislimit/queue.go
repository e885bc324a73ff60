package redislimit

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/internal/nilcheck"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

// DefaultLease is how long a permit or a place in a [Queue]'s line lasts
// in Redis without a renewal, unless [WithLease] says otherwise. A
// process killed while it holds permits has them back in the fleet
// within the lease plus one renewal period (2.5 s by default).
const DefaultLease = 2 * time.Second

// DefaultRenewEvery is how often a [Queue] renews the leases of the
// permits and places its process holds, unless [WithRenewEvery] says
// otherwise.
const DefaultRenewEvery = 500 * time.Millisecond

// queueConfig is what the Queue's options set.
type queueConfig struct {
	lease, every time.Duration
	manual       bool // test-only: no renewal goroutine; see withoutRenewals
}

// maxLease bounds WithLease: the queue's meta hash, whose birth starts
// the lease of grace, lives a day past its last call (queue.lua), and a
// longer lease only left a Queue that grants nothing until it ends.
const maxLease = 24 * time.Hour

// withoutRenewals has a Queue renew only when a test calls renew, so that
// tests on frozen time decide when leases are renewed.
func withoutRenewals() Option {
	return option{"withoutRenewals", false, func(c *config) { c.queue.manual = true }}
}

// WithLease sets how long a [Queue]'s permits and places in line last in
// Redis without a renewal (default [DefaultLease], also for 0). It
// bounds how long a dead holder keeps its permits. It must be longer than
// the renewal period ([WithRenewEvery]), and at most a day. Limiters
// ignore it.
func WithLease(d time.Duration) Option {
	return option{"WithLease", false, func(c *config) { c.queue.lease = d }}
}

// WithRenewEvery sets how often a [Queue] renews its process's leases
// (default [DefaultRenewEvery], also for 0). It also bounds how late a
// waiter whose grant message was lost learns of its permit. Limiters
// ignore it.
func WithRenewEvery(d time.Duration) Option {
	return option{"WithRenewEvery", false, func(c *config) { c.queue.every = d }}
}

type queueFallback struct {
	local queue.Interface
}

func (queueFallback) failurePolicy() {}

// QueueFallback returns a FailurePolicy for a [Queue] that takes slots
// from local while Redis is away. local is an in-process queue, so each
// of the processes sharing the Queue bounds its own calls: give it
// maxInFlight/processes slots (rounded down, at least 1), so that
// together they stay within the shared bound. Permits taken from Redis
// before the outage count against Redis only: for up to one lease the
// fleet may hold those and the local slots both. Slots taken from local
// count against local only: once Redis is back, the fleet may hold those
// and Redis's permits both, until they are released. A caller waiting in
// the local line asks Redis again every [WithRenewEvery], so that once
// Redis is back it waits in Redis's line, and the local line hands out
// no more. A limiter given QueueFallback fails closed. A nil local
// panics.
func QueueFallback(local queue.Interface) FailurePolicy {
	if nilcheck.Is(local) {
		panic("redislimit: QueueFallback given a nil queue")
	}
	return queueFallback{local: local}
}

var _ queue.Interface = (*Queue)(nil)

// grantMessage starts what the queue script publishes on the Client's
// channel when it hands a permit to a waiter: "grant <id>".
const grantMessage = "grant "

// errPlaceExpired is why a waiter is woken when Redis, answering its
// process's renewal, no longer has its place: the process could not renew
// for a lease (it was stalled) while Redis was up. That is no outage, so
// the failure policy does not answer: the caller joins the line again.
// Under the policy, FailOpen let such a caller through past the holders,
// over maxInFlight, and FailClosed failed it with ErrUnavailable while
// Redis answered (found by a user's test).
var errPlaceExpired = errors.New("redislimit: the place in the queue's line expired")

// Queue is a bounded queue shared through Redis, with the behaviour of
// [queue.Queue] across every process that builds one with the same
// prefix and name: at most maxInFlight permits are held at once in the
// whole fleet, at most maxWaiting callers wait in line, and they are
// served first in, first out, by their time of arrival in Redis, with no
// barging: a newcomer never takes a permit while someone waits.
//
// Each permit has its own id and a lease in Redis time. One goroutine
// per Queue renews every lease its process holds, every [WithRenewEvery];
// a process that dies stops renewing, and its permits go back to the
// fleet once their lease runs out ([WithLease]). A release names its
// permit, so a late or repeated release never frees another's; and Redis
// keeps the name for a lease, so that a call it runs after the release (a
// renewal sent before it, or an acquire whose reply was lost) takes
// nothing back.
//
// Acquiring a free permit is one call to Redis, and so is releasing one.
// A release that frees a permit while callers wait hands it to the first
// of them in the same call, and tells its process through the [Client]'s
// pub/sub channel; that process learns it at its next renewal at the
// latest, should the message be lost, or should rdb have no Subscribe.
//
// When Redis cannot decide, Acquire and TryAcquire follow the policy
// given by [WithFailurePolicy]: [FailClosed] (the default), [FailOpen],
// or [QueueFallback].
//
// A holder that cannot reach Redis for a whole lease loses its permit,
// though its call still runs; its next renewal claims it back if one is
// free, and otherwise the fleet holds one more than maxInFlight until the
// call ends. When Redis loses its data (a restart without persistence),
// the Queue grants no free permit for one lease, so that the holders
// still running claim theirs back first through their renewals; so does
// a Queue's first use, or the first after a day unused. When Redis comes
// back with older data (a restart from a snapshot, or a failover to a
// replica that missed the last writes), the holders granted since claim
// their permits back at their next renewal, while permits are free; a
// permit granted again before that renewal leaves the fleet over
// maxInFlight until one of the two calls ends.
//
// A Queue is safe for concurrent use. Close it when done.
type Queue struct {
	client *Client
	own    bool // Close closes client
	script *script
	keys   []string
	n, m   int
	lease  time.Duration
	every  time.Duration
	policy FailurePolicy
	proc   string // this Queue's part of every id
	next   atomic.Uint64

	// mu guards the fields below.
	mu        sync.Mutex
	held      map[string]struct{} // ids of the permits this process holds
	waiting   map[string]*waiter  // ids of its places in line
	rejected  uint64
	local     int // QueueFallback's slots held through this Queue
	inLocal   int // callers waiting in QueueFallback's local line
	closed    bool
	renewedAt int64 // local ns: the last renewal Redis answered, or had nothing to renew

	calls     sync.WaitGroup     // Acquire and TryAcquire calls; Add under mu, while !closed
	stop      context.Context    // ends when Close begins; it ends the waits in QueueFallback's local line too
	halt      context.CancelFunc // ends stop
	done      chan struct{}      // closed when the renewal goroutine ends
	closeOnce sync.Once
}

// waiter is a caller in line.
type waiter struct {
	ready chan struct{} // closed once, by grant or lose
	once  sync.Once
	err   error // set before ready is closed: why the place was lost
}

func (w *waiter) grant() { w.once.Do(func() { close(w.ready) }) }

func (w *waiter) lose(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
}

// granted wakes the waiter with id, if it is this process's.
func (c *Client) granted(id string) {
	if v, ok := c.grants.Load(id); ok {
		if w, ok := v.(*waiter); ok {
			w.grant()
		}
	}
}

// NewQueue returns a Queue named name on rdb that lets at most maxInFlight
// callers in the fleet hold a permit at once, and at most maxWaiting more
// wait for one. It takes [WithLease], [WithRenewEvery],
// [WithFailurePolicy] and either [WithClient] or the Client's options.
//
// NewQueue returns an error naming the value when maxInFlight is less
// than 1 or more than 2^53, maxWaiting is less than 0, name is empty, or
// the lease is not longer than the renewal period or is longer than a
// day. Every process sharing the Queue must give it the same maxInFlight,
// and should give it the same lease.
func NewQueue(rdb redis.Scripter, name string, maxInFlight, maxWaiting int, opts ...Option) (*Queue, error) {
	if nilcheck.Is(rdb) {
		panic("redislimit: nil redis.Scripter")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	cfg.queue.lease = cmpOr(cfg.queue.lease, DefaultLease)
	cfg.queue.every = cmpOr(cfg.queue.every, DefaultRenewEvery)
	switch {
	case maxInFlight < 1:
		return nil, fmt.Errorf("redislimit: maxInFlight must be at least 1, got %d", maxInFlight)
	case maxInFlight > 1<<53:
		// The script hands out permits with ZRANGE, whose bounds Lua
		// writes as doubles: past 2^53 every call failed with "value is
		// not an integer" once the queue was warm.
		return nil, fmt.Errorf("redislimit: maxInFlight %d is above 2^53, the most a queue counts exactly", maxInFlight)
	case maxWaiting < 0:
		return nil, fmt.Errorf("redislimit: maxWaiting must be at least 0, got %d", maxWaiting)
	case name == "" || name[0] == '}':
		return nil, fmt.Errorf("redislimit: queue name must be non-empty and not start with '}', got %q", name)
	case len(name) > throttle.MaxKeyLen:
		return nil, fmt.Errorf("redislimit: queue name of %d bytes is longer than throttle.MaxKeyLen (%d)", len(name), throttle.MaxKeyLen)
	case cfg.queue.every <= 0:
		return nil, fmt.Errorf("redislimit: WithRenewEvery must be positive, got %v", cfg.queue.every)
	case cfg.queue.lease > maxLease:
		return nil, fmt.Errorf("redislimit: WithLease (%v) must be at most %v: a Queue grants no free permit for a lease on its first use, and a dead holder keeps its permits as long", cfg.queue.lease, maxLease)
	case cfg.queue.lease <= cfg.queue.every:
		return nil, fmt.Errorf("redislimit: WithLease (%v) must be longer than the renewal period, WithRenewEvery (%v)", cfg.queue.lease, cfg.queue.every)
	}
	for _, o := range cfg.set {
		switch o.name {
		case "WithTolerance", "WithWindowOffset", "WithSlotLease", "WithStated", "WithFloor":
			return nil, fmt.Errorf("redislimit: NewQueue does not take %s", o.name)
		}
	}
	switch p := cfg.policy.(type) {
	case FailMode:
		if p == FailShare {
			return nil, errors.New("redislimit: NewQueue takes FailClosed, FailOpen or QueueFallback, got FailShare")
		}
	case queueFallback:
	default:
		return nil, fmt.Errorf("redislimit: NewQueue takes FailClosed, FailOpen or QueueFallback, got %T", p)
	}
	q := &Queue{
		client: cfg.client, n: maxInFlight, m: maxWaiting,
		lease: cfg.queue.lease, every: cfg.queue.every, policy: cfg.policy,
		script: newQueueScript(), proc: newProcID(),
		held: make(map[string]struct{}), waiting: make(map[string]*waiter),
		done: make(chan struct{}),
	}
	q.stop, q.halt = context.WithCancel(context.Background())
	if q.client == nil {
		q.client, q.own = newClient(rdb, cfg), true
	} else {
		if err := cfg.only(false, "a Queue given WithClient"); err != nil {
			return nil, err
		}
		if !sameClient(rdb, q.client.rdb) {
			return nil, fmt.Errorf("redislimit: WithClient's Client is on another redis client than the Queue's")
		}
	}
	tag := q.client.prefix + "{" + name + "}:queue:"
	q.keys = []string{tag + "holders", tag + "line", tag + "waitexp", tag + "meta", tag + "released"}
	q.renewedAt = q.client.now()
	if cfg.queue.manual {
		close(q.done)
	} else {
		go q.renewLoop()
	}
	return q, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// newQueueScript returns the queue script, apart from the budget script.
func newQueueScript() *script {
	src, err := sources.ReadFile("queue.lua")
	if err != nil {
		panic(fmt.Sprintf("redislimit: embedded queue.lua: %v", err)) // cannot happen: embedded
	}
	sum := sha1.Sum(src)
	return &script{src: string(src), sha: hex.EncodeToString(sum[:])}
}

// newProcID returns 8 random bytes in hex: ids of different processes
// never meet.
func newProcID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// newID returns an id no other permit or place has.
func (q *Queue) newID() string {
	return q.proc + ":" + strconv.FormatUint(q.next.Add(1), 10)
}

// Replies of the acquire op.
const (
	replyGranted = 1
	replyWaiting = 0
	replyFull    = -1
	replyBusy    = -2
)

// call runs op with its arguments.
func (q *Queue) call(ctx context.Context, op string, extra ...any) (any, error) {
	args := make([]any, 0, 5+len(extra))
	args = append(args, op, q.client.frozenMicros(), q.n, q.lease.Microseconds(), q.client.channel)
	args = append(args, extra...)
	return q.client.runScript(ctx, q.script, q.keys, args)
}

// Acquire takes a permit, waiting in line until one is free or ctx is
// done. Most callers want Acquire, and defer the release it returns;
// calling release more than once is safe.
//
// Acquire fails at once, taking nothing, if ctx is already done, or if
// every permit is held and the line is full; the latter error satisfies
// errors.Is(err, [queue.ErrFull]). If ctx ends while the caller waits,
// its place (or the permit handed to it meanwhile) goes to the next in
// line, and Acquire returns ctx.Err(). When Redis cannot decide, the
// failure policy answers.
func (q *Queue) Acquire(ctx context.Context) (release func(), err error) {
	release, _, err = q.AcquireWaited(ctx)
	return release, err
}

// AcquireWaited is [Queue.Acquire] that also reports whether the caller
// waited in line (in Redis's, or in QueueFallback's local queue) rather
// than taking a free permit at once. An egress Transport given the Queue
// with WithQueue calls it in place of TryAcquire then Acquire, which cost
// a request that waits a round trip more: three, where one acquire and
// one release are two.
func (q *Queue) AcquireWaited(ctx context.Context) (release func(), waited bool, err error) {
	if ctx == nil {
		return nil, false, errNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if !q.enter() {
		return nil, false, ErrClosed
	}
	defer q.calls.Done()
	for {
		release, w, err := q.acquireOnce(ctx)
		waited = waited || w
		if !errors.Is(err, errPlaceExpired) {
			return release, waited, err
		}
		// The place ran out while Redis answered: join the line again,
		// unless Close has begun.
		if q.stop.Err() != nil {
			return nil, waited, ErrClosed
		}
	}
}

// acquireOnce is one try of AcquireWaited: errPlaceExpired means the
// caller's place ran out while its process was stalled, Redis answering,
// and it may join the line again.
func (q *Queue) acquireOnce(ctx context.Context) (release func(), waited bool, err error) {
	id := q.newID()
	w := &waiter{ready: make(chan struct{})}
	q.client.grants.Store(id, w) // before the call: the grant may come first
	defer q.client.grants.Delete(id)
	v, err := q.call(ctx, "acquire", id, 1, q.m)
	if err != nil {
		q.giveUp(id) // the call may have reached Redis
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		release, err := q.fail(err, q.acquireWith(ctx, &waited))
		return release, waited, err
	}
	st, err := integer(v, "queue acquire")
	if err != nil {
		q.giveUp(id)
		return nil, false, err
	}
	switch st {
	case replyGranted:
		return q.hold(id), false, nil
	case replyFull:
		q.mu.Lock()
		q.rejected++
		q.mu.Unlock()
		return nil, false, fmt.Errorf("redislimit: %w", queue.ErrFull)
	case replyWaiting:
	default:
		q.giveUp(id)
		return nil, false, fmt.Errorf("redislimit: unexpected reply to queue acquire: %d", st)
	}
	q.mu.Lock()
	q.waiting[id] = w
	q.mu.Unlock()
	select {
	case <-w.ready:
	case <-ctx.Done():
	case <-q.stop.Done():
	}
	q.mu.Lock()
	delete(q.waiting, id)
	q.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		// Prefer to fail when both are ready, so that a caller whose ctx
		// has ended never goes on; what it was given goes to the next.
		q.giveUp(id)
		return nil, true, ctx.Err()
	case !isClosed(w.ready):
		q.giveUp(id)
		return nil, true, ErrClosed
	case errors.Is(w.err, errPlaceExpired):
		return nil, true, w.err
	case w.err != nil: // read once ready is closed, after lose wrote it
		release, err := q.fail(w.err, q.acquireWith(ctx, nil))
		return release, true, err
	}
	return q.hold(id), true, nil
}

// enter counts a call that Close waits for, unless Close has begun.
func (q *Queue) enter() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.calls.Add(1)
	return true
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TryAcquire takes a permit if one is free and nobody waits for it,
// without waiting. It is the non-blocking twin of [Queue.Acquire], and
// makes one call to Redis, bounded by [WithTimeout]. When Redis cannot
// decide, the failure policy answers: ok is false under FailClosed.
func (q *Queue) TryAcquire() (release func(), ok bool) {
	if !q.enter() {
		return nil, false
	}
	defer q.calls.Done()
	id := q.newID()
	v, err := q.call(context.Background(), "acquire", id, 0, q.m)
	if err != nil {
		q.giveUp(id)
		release, err := q.fail(err, func(local queue.Interface) (func(), error) {
			if release, ok := local.TryAcquire(); ok {
				return release, nil
			}
			return nil, queue.ErrFull
		})
		return release, err == nil
	}
	if st, err := integer(v, "queue acquire"); err != nil || st != replyGranted {
		return nil, false
	}
	return q.hold(id), true
}

// Stats returns this process's counts: the permits it holds, its callers
// in line, and its Acquire calls refused with ErrFull, [QueueFallback]'s
// local slots, line and refusals included while Redis is away. It makes
// no call to Redis; [Queue.FleetStats] counts the whole fleet.
func (q *Queue) Stats() queue.Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queue.Stats{InFlight: len(q.held) + q.local, Waiting: len(q.waiting) + q.inLocal, Rejected: q.rejected}
}

// FleetStats returns the permits held and the callers in line across
// the fleet, in one call to Redis. Rejected is this process's count.
func (q *Queue) FleetStats(ctx context.Context) (queue.Stats, error) {
	if ctx == nil {
		return queue.Stats{}, errNilContext
	}
	v, err := q.call(ctx, "stats")
	if err != nil {
		return queue.Stats{}, err
	}
	a, err := array(v, 2, "queue stats")
	if err != nil {
		return queue.Stats{}, err
	}
	is, err := integers(a, "holders", "waiters")
	if err != nil {
		return queue.Stats{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return queue.Stats{InFlight: int(is[0]), Waiting: int(is[1]), Rejected: q.rejected}, nil
}

// acquireWith returns the local queue's Acquire, bounded by ctx and by
// Close: a caller waiting in the local line while Redis is away fails
// with ErrClosed when Close begins, as a caller in Redis's line does.
// Left out, Close waited until the local queue served every such caller
// (found by a user's test). Given waited, it first tries for a free slot
// and sets *waited when there is none.
func (q *Queue) acquireWith(ctx context.Context, waited *bool) func(queue.Interface) (func(), error) {
	return func(local queue.Interface) (func(), error) {
		if waited != nil {
			if release, ok := local.TryAcquire(); ok {
				return release, nil
			}
			*waited = true
		}
		// A caller waits in the local line for one renewal period at a
		// time, then asks Redis again (errPlaceExpired: AcquireWaited
		// joins Redis's line, or, while Redis is still away, this line
		// again at its back). Left in it, the local line went on handing
		// out slots after Redis was back, beside Redis's permits: 2 in
		// flight of 1 for as long as it had waiters (found by a user's
		// test).
		lctx, cancel := context.WithTimeoutCause(ctx, q.every, errPlaceExpired)
		defer cancel()
		unhook := context.AfterFunc(q.stop, cancel)
		defer unhook()
		q.mu.Lock()
		q.inLocal++
		q.mu.Unlock()
		release, err := local.Acquire(lctx)
		q.mu.Lock()
		q.inLocal--
		if errors.Is(err, queue.ErrFull) {
			q.rejected++
		}
		q.mu.Unlock()
		switch {
		case err == nil || ctx.Err() != nil:
		case q.stop.Err() != nil:
			return nil, ErrClosed
		case errors.Is(context.Cause(lctx), errPlaceExpired):
			return nil, errPlaceExpired
		}
		return release, err
	}
}

// fail applies the failure policy to err; under QueueFallback, acquire
// takes a slot from the local queue.
func (q *Queue) fail(err error, acquire func(local queue.Interface) (func(), error)) (func(), error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	switch p := q.policy.(type) {
	case FailMode:
		if p == FailOpen {
			return func() {}, nil
		}
	case queueFallback:
		release, err := acquire(p.local)
		if err != nil {
			return nil, err
		}
		// Counted in Stats, which read 0 while the fallback's slots
		// were held (found by a user's test).
		q.mu.Lock()
		q.local++
		q.mu.Unlock()
		var released atomic.Bool
		return func() {
			if released.CompareAndSwap(false, true) {
				q.mu.Lock()
				q.local--
				q.mu.Unlock()
				release()
			}
		}, nil
	}
	return nil, err
}

// hold records the permit id as held, and returns its release.
func (q *Queue) hold(id string) func() {
	q.mu.Lock()
	q.held[id] = struct{}{}
	q.mu.Unlock()
	var released atomic.Bool
	return func() {
		if !released.CompareAndSwap(false, true) {
			return
		}
		q.mu.Lock()
		delete(q.held, id)
		q.mu.Unlock()
		q.giveUp(id)
	}
}

// giveUp releases the permit or leaves the place id has, in one call,
// bounded by [WithTimeout]. Should the call fail, the lease, no longer
// renewed, runs out.
func (q *Queue) giveUp(id string) {
	_, _ = q.call(context.Background(), "release", id)
}

// renewLoop renews every period until Close.
func (q *Queue) renewLoop() {
	defer close(q.done)
	t := time.NewTimer(q.every)
	defer t.Stop()
	for {
		select {
		case <-q.stop.Done():
			return
		case <-t.C:
		}
		q.renew(context.Background())
		t.Reset(q.every)
	}
}

// renew extends the lease of every permit and place this process holds,
// in one call, and wakes the waiters that call finds holding a permit:
// the backstop for a lost grant message. A waiter whose place is gone
// (its process stalled for a lease) joins the line again; one that Redis
// has not answered for a whole lease fails, as the failure policy says.
func (q *Queue) renew(ctx context.Context) {
	q.mu.Lock()
	held := make([]string, 0, len(q.held))
	for id := range q.held {
		held = append(held, id)
	}
	waiting := make([]string, 0, len(q.waiting))
	ws := make([]*waiter, 0, len(q.waiting))
	for id, w := range q.waiting {
		waiting = append(waiting, id)
		ws = append(ws, w)
	}
	if len(held)+len(waiting) == 0 {
		q.renewedAt = q.client.now()
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	extra := make([]any, 0, 1+len(held)+len(waiting))
	extra = append(extra, len(held))
	for _, id := range held {
		extra = append(extra, id)
	}
	for _, id := range waiting {
		extra = append(extra, id)
	}
	v, err := q.call(ctx, "renew", extra...)
	var a []any
	if err == nil {
		a, err = array(v, len(held)+len(waiting), "queue renew")
	}
	if errors.Is(err, ErrClosed) {
		// The shared Client was closed before the Queue: no outage, and
		// never an answer. Under the failure policy, FailOpen let these
		// callers through a lease later (found by a user's test).
		for _, w := range ws {
			w.lose(ErrClosed)
		}
		return
	}
	if err != nil {
		q.mu.Lock()
		late := q.client.now()-q.renewedAt >= int64(q.lease)
		q.mu.Unlock()
		if late {
			lost := err
			if ue := (*UnavailableError)(nil); !errors.As(err, &ue) {
				lost = &UnavailableError{Err: err}
			}
			for _, w := range ws {
				w.lose(lost) // an UnavailableError already says so: wrapped again, it said it twice
			}
		}
		return
	}
	q.mu.Lock()
	q.renewedAt = q.client.now()
	q.mu.Unlock()
	for i, w := range ws {
		switch st, _ := integer(a[len(held)+i], "queue renew"); st {
		case 1:
			w.grant()
		case 0:
			w.lose(errPlaceExpired)
		}
	}
}

// Close stops the renewals and waits for their goroutine; callers in
// line fail with [ErrClosed], giving their places up, and later calls
// fail with it too. Permits still held are no longer renewed,
// and go back to the fleet once their lease runs out: release them
// before Close. A Queue built without [WithClient] closes its own
// Client. Close is idempotent.
func (q *Queue) Close() error {
	var err error
	q.closeOnce.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
		q.halt()
		q.calls.Wait()
		<-q.done
		if q.own {
			err = q.client.Close()
		}
	})
	return err
}
