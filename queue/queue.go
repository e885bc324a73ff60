package queue

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrFull is returned by [Queue.Acquire] when every slot is busy and the wait
// line already holds as many callers as the Queue allows.
var ErrFull = errors.New("queue: full")

// errNilContext is Acquire's answer to a nil context, as package
// throttle's limiters answer it, rather than a nil pointer panic.
var errNilContext = errors.New("queue: nil context")

// Interface is what a caller needs of a bounded queue: a slot, waited for
// or taken at once, and a snapshot of the counts. [*Queue] implements it
// within one process; a queue shared by several processes (through Redis,
// say) implements it too, so that code written against Interface, such as
// egress.WithQueue, takes either.
//
// Implementations must be safe for concurrent use, follow [Queue.Acquire]
// and [Queue.TryAcquire] in what they return, and make every release
// function safe to call more than once.
type Interface interface {
	// Acquire takes a slot, waiting in line until one is free or ctx is
	// done; it fails with an error matching [ErrFull] when the line is
	// full. See [Queue.Acquire].
	Acquire(ctx context.Context) (release func(), err error)
	// TryAcquire takes a free slot without waiting, or reports false.
	TryAcquire() (release func(), ok bool)
	// Stats returns a snapshot of the counts.
	Stats() Stats
}

var _ Interface = (*Queue)(nil)

// Queue bounds the number of calls in flight, and the number of callers
// waiting for a slot.
//
// Callers wait in first-in first-out order. A slot that is released while
// callers wait goes straight to the first of them, so a newcomer, through
// either [Queue.Acquire] or [Queue.TryAcquire], never overtakes a waiter.
//
// A Queue is safe for concurrent use by multiple goroutines. The zero value
// is not usable, and neither is a nil *Queue: create one with [New].
//
// Queue does not build on golang.org/x/sync/semaphore: the bound on waiters
// has to be checked and the waiter enqueued under one lock, and the release
// functions carry a per-grant identity that a semaphore does not expose. The
// wait line below follows semaphore.Weighted closely, including its handling
// of a grant that races with a cancellation.
type Queue struct {
	maxInFlight int
	maxWaiting  int

	// mu guards the fields below. It is never held while blocking or while
	// calling code outside this package.
	//
	// Invariants:
	//   - inFlight == len(gens) - len(free) and inFlight <= maxInFlight;
	//   - waiters.Len() <= maxWaiting;
	//   - if waiters.Len() > 0, then inFlight == maxInFlight: a released
	//     slot is handed to the first waiter rather than freed.
	mu       sync.Mutex
	inFlight int
	waiters  list.List // of *waiter, in arrival order
	rejected uint64

	// Every slot taken so far has an index into gens. gens[i] counts the
	// releases of slot i, so that a release function, which records the
	// generation it was granted, acts only once: after its first call the
	// generation has moved on. free holds the indices of the slots nobody
	// holds. Both grow only up to the largest number of calls ever in
	// flight at once, and are reused afterwards. A flag per grant would be
	// simpler but cost an allocation per grant; generations let a [Slot]
	// be a value, which buys the Transport's goal of at most 3 allocations
	// per request (bench/micro, BenchmarkTransportOverhead).
	gens []uint64
	free []int
}

// waiter is a caller blocked in Acquire.
type waiter struct {
	ready chan struct{} // closed, under mu, once slot and gen are set
	slot  int
	gen   uint64
}

// Stats is a snapshot of a [Queue], taken at one instant.
type Stats struct {
	// InFlight is the number of slots held: granted and not yet released.
	InFlight int
	// Waiting is the number of callers blocked in Acquire, waiting for a
	// slot.
	Waiting int
	// Rejected is the number of Acquire calls refused with ErrFull since
	// the Queue was created. TryAcquire calls that found no free slot and
	// Acquire calls whose context ended are not counted.
	Rejected uint64
}

// New returns a Queue that lets at most maxInFlight calls hold a slot at once,
// and at most maxWaiting more wait for one. maxWaiting 0 means that nobody
// waits: Acquire fails with [ErrFull] whenever every slot is busy.
//
// New returns an error if maxInFlight is less than 1 or maxWaiting is less
// than 0. For a wait line with no practical bound, pass math.MaxInt.
func New(maxInFlight, maxWaiting int) (*Queue, error) {
	if maxInFlight < 1 {
		return nil, fmt.Errorf("queue: maxInFlight must be at least 1, got %d", maxInFlight)
	}
	if maxWaiting < 0 {
		return nil, fmt.Errorf("queue: maxWaiting must be at least 0, got %d", maxWaiting)
	}
	return &Queue{maxInFlight: maxInFlight, maxWaiting: maxWaiting}, nil
}

// Acquire takes a slot, waiting in line until one is free or ctx is done. Most
// callers want Acquire, and defer the release it returns.
//
// On success, the caller holds the slot until it calls release. Calling
// release more than once is safe: only the first call has an effect.
//
// Acquire fails at once, taking nothing, if ctx is nil or already done, or
// if every slot is busy and the wait line is full; the latter error
// satisfies errors.Is(err, [ErrFull]). If ctx ends while the caller waits,
// Acquire leaves the Queue as it would have been had the call never been
// made, and returns ctx.Err().
func (q *Queue) Acquire(ctx context.Context) (release func(), err error) {
	s, err := q.AcquireSlot(ctx)
	if err != nil {
		return nil, err
	}
	return s.Release, nil
}

// AcquireSlot is [Queue.Acquire] returning the slot as a [Slot] value:
// the caller holds the slot until it calls the Slot's Release. Taking a
// free slot costs no allocation; waiting in line costs what Acquire's
// does.
func (q *Queue) AcquireSlot(ctx context.Context) (Slot, error) {
	if ctx == nil {
		return Slot{}, errNilContext
	}
	done := ctx.Done()

	q.mu.Lock()
	select {
	case <-done:
		// ctx ended before the call, or while it waited for the lock.
		// Fail even if a slot is free, as semaphore.Weighted does.
		q.mu.Unlock()
		return Slot{}, ctx.Err()
	default:
	}
	if q.inFlight < q.maxInFlight && q.waiters.Len() == 0 {
		s := q.grantLocked()
		q.mu.Unlock()
		return s, nil
	}
	if q.waiters.Len() >= q.maxWaiting {
		q.rejected++
		q.mu.Unlock()
		return Slot{}, ErrFull
	}
	w := &waiter{ready: make(chan struct{})}
	elem := q.waiters.PushBack(w)
	q.mu.Unlock()

	select {
	case <-done:
		q.mu.Lock()
		select {
		case <-w.ready:
			// The slot was handed over just as ctx ended. Pretend it was
			// not, and pass it on to the next waiter.
			q.releaseLocked(w.slot, w.gen)
		default:
			// Still in line, so every slot is busy: leaving frees nothing
			// for the waiters behind.
			q.waiters.Remove(elem)
		}
		q.mu.Unlock()
		return Slot{}, ctx.Err()

	case <-w.ready:
		// Both may be ready at once, and select picks at random. Prefer
		// to fail, so that a caller whose ctx has ended never goes on.
		select {
		case <-done:
			q.release(w.slot, w.gen)
			return Slot{}, ctx.Err()
		default:
		}
		return Slot{q, w.slot, w.gen}, nil
	}
}

// TryAcquire takes a slot if one is free and nobody is waiting for it, without
// blocking. It is the non-blocking twin of [Queue.Acquire].
//
// On success, ok is true and the caller holds the slot until it calls
// release; calling release more than once is safe. Otherwise ok is false,
// release is nil, and the Queue is unchanged.
func (q *Queue) TryAcquire() (release func(), ok bool) {
	s, ok := q.TryAcquireSlot()
	if !ok {
		return nil, false
	}
	return s.Release, true
}

// TryAcquireSlot is [Queue.TryAcquire] returning the slot as a [Slot]
// value, which costs no allocation: the caller holds the slot until it
// calls the Slot's Release.
func (q *Queue) TryAcquireSlot() (Slot, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inFlight < q.maxInFlight && q.waiters.Len() == 0 {
		return q.grantLocked(), true
	}
	return Slot{}, false
}

// Slot is one slot of a [Queue], held from [Queue.TryAcquireSlot] or
// [Queue.AcquireSlot] until its Release: the same grant as the release
// func of [Queue.TryAcquire] and [Queue.Acquire], as a value that costs
// no allocation to take (goal: ≤ 3 allocs overhead per request,
// bench/micro BenchmarkTransportOverhead). The zero Slot holds nothing.
//
// A Slot may be copied; it is safe for concurrent use.
type Slot struct {
	q   *Queue
	idx int
	gen uint64
}

// Release gives the slot back. Only the first call, on the Slot or any
// copy of it, has an effect; Release on the zero Slot does nothing.
func (s Slot) Release() {
	if s.q != nil {
		s.q.release(s.idx, s.gen)
	}
}

// Stats returns a consistent snapshot of the Queue's counts.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Stats{
		InFlight: q.inFlight,
		Waiting:  q.waiters.Len(),
		Rejected: q.rejected,
	}
}

// grantLocked takes a free slot and returns it. q.mu must be held, and a
// slot must be free.
func (q *Queue) grantLocked() Slot {
	var slot int
	if n := len(q.free); n > 0 {
		slot = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		slot = len(q.gens)
		q.gens = append(q.gens, 0)
	}
	q.inFlight++
	return Slot{q, slot, q.gens[slot]}
}

// release gives back generation gen of slot, if that is still what the slot
// holds.
func (q *Queue) release(slot int, gen uint64) {
	q.mu.Lock()
	q.releaseLocked(slot, gen)
	q.mu.Unlock()
}

// releaseLocked gives back generation gen of slot: it hands the slot to the
// first waiter, or frees it if nobody waits. It does nothing if that
// generation was already released. q.mu must be held.
func (q *Queue) releaseLocked(slot int, gen uint64) {
	if q.gens[slot] != gen {
		return // released before
	}
	q.gens[slot]++
	front := q.waiters.Front()
	if front == nil {
		q.free = append(q.free, slot)
		q.inFlight--
		return
	}
	w := q.waiters.Remove(front).(*waiter)
	w.slot, w.gen = slot, q.gens[slot]
	close(w.ready)
}
