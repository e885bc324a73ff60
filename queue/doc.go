// Package queue bounds how many calls run at once, and how many may wait
// for a turn.
//
// A [Queue] is a semaphore with a bounded, first-in first-out wait line.
// Create one with [New], giving the number of calls allowed in flight and the
// number allowed to wait. Then wrap each call in [Queue.Acquire]:
//
//	q, err := queue.New(8, 100) // 8 in flight, up to 100 waiting
//	if err != nil {
//		return err
//	}
//	...
//	release, err := q.Acquire(ctx)
//	if err != nil {
//		return err // queue.ErrFull, or ctx's error
//	}
//	defer release()
//
// Acquire waits its turn when every slot is busy, and fails at once with
// [ErrFull] when the wait line is full too, so that a burst of work is shed
// instead of piling up. [Queue.TryAcquire] is the non-blocking twin: it takes a
// free slot or reports that there is none. Waiters are served strictly in
// arrival order, and a newcomer never overtakes a waiter.
// [Queue.AcquireSlot] and [Queue.TryAcquireSlot] return the slot as a
// [Slot] value instead of a release func, which costs no allocation.
//
// [Queue.Stats] reports how many calls are in flight, how many are waiting
// and how many were turned away.
//
// The egress Transport takes a Queue, or any [Interface], through
// egress.WithQueue, and holds a slot from the start of a request until its
// response body is closed, read to the end or fails, or its context ends.
package queue
