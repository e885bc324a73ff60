package queue_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/egress-go/egress/queue"
)

func ExampleNew() {
	// At most 2 calls at once, and at most 10 more waiting for a turn.
	q, err := queue.New(2, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	release, err := q.Acquire(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", q.Stats())
	release()
	fmt.Printf("%+v\n", q.Stats())

	_, err = queue.New(0, 10)
	fmt.Println(err)
	// Output:
	// {InFlight:1 Waiting:0 Rejected:0}
	// {InFlight:0 Waiting:0 Rejected:0}
	// queue: maxInFlight must be at least 1, got 0
}

func ExampleQueue_Acquire() {
	// One call at a time, and nobody may wait.
	q, err := queue.New(1, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	release, err := q.Acquire(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release()

	// The slot is busy and the wait line is full, so this fails at once.
	_, err = q.Acquire(context.Background())
	fmt.Println(err)
	fmt.Println(errors.Is(err, queue.ErrFull))
	fmt.Printf("%+v\n", q.Stats())
	// Output:
	// queue: full
	// true
	// {InFlight:1 Waiting:0 Rejected:1}
}

func ExampleQueue_TryAcquire() {
	q, err := queue.New(1, 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	release, ok := q.TryAcquire()
	fmt.Println(ok)

	// The only slot is taken.
	_, ok = q.TryAcquire()
	fmt.Println(ok)

	release()
	release() // a second call does nothing
	release, ok = q.TryAcquire()
	fmt.Println(ok)
	release()
	// Output:
	// true
	// false
	// true
}

func ExampleQueue_TryAcquireSlot() {
	q, err := queue.New(1, 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	// A Slot is a value: taking one allocates nothing.
	s, ok := q.TryAcquireSlot()
	fmt.Println(ok, q.Stats().InFlight)
	s.Release()
	s.Release() // a second call does nothing
	fmt.Println(q.Stats().InFlight)
	// Output:
	// true 1
	// 0
}
