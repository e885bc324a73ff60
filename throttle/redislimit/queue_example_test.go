package redislimit_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle/redislimit"
)

// Every worker builds the same Queue on the same Redis: at most 8 calls
// run at once across all of them, and up to 100 more wait in line, first
// come, first served. This example needs a Redis to talk to, so it is not
// run.
func ExampleNewQueue() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	q, err := redislimit.NewQueue(rdb, "api.example.com", 8, 100)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	release, err := q.Acquire(context.Background())
	if err != nil {
		return // the line is full (queue.ErrFull), or Redis is away
	}
	defer release()
	// send the request
}

// Bad input is an error that names the field and the value.
func ExampleNewQueue_badInput() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	_, err := redislimit.NewQueue(rdb, "api.example.com", 0, 100)
	fmt.Println(err)
	// Output: redislimit: maxInFlight must be at least 1, got 0
}

// While Redis is away, QueueFallback bounds each process with a queue of
// its own: 8 permits shared by 4 processes give each process 2.
func ExampleQueueFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	local, err := queue.New(8/4, 0)
	if err != nil {
		panic(err)
	}
	q, err := redislimit.NewQueue(rdb, "api.example.com", 8, 100,
		redislimit.WithFailurePolicy(redislimit.QueueFallback(local)))
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()
	first, err := q.Acquire(ctx)
	fmt.Println(err)
	second, err := q.Acquire(ctx)
	fmt.Println(err)
	_, err = q.Acquire(ctx)
	fmt.Println(errors.Is(err, queue.ErrFull))
	first()
	second()
	fmt.Println(local.Stats().InFlight)
	// Output:
	// <nil>
	// <nil>
	// true
	// 0
}
