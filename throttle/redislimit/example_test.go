package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// Workers in every process build the same limiter on the same Redis and
// share its budget. This example needs a Redis to talk to, so it is not
// run.
func ExampleNewTokenBucket() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	l, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(200), 10,
		redislimit.WithTolerance(throttle.DefaultTolerance))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	if err := throttle.Wait(context.Background(), l, "api.example.com", 1); err != nil {
		panic(err)
	}
	// send the request
}

// 20 per second and 10 000 per day on one key, booked together.
func ExampleAll() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	perSecond, _ := redislimit.NewTokenBucket(rdb, throttle.PerSecond(20), 20)
	defer perSecond.Close()
	perDay, _ := redislimit.NewFixedWindow(rdb, 10_000, 24*time.Hour)
	defer perDay.Close()
	both, err := redislimit.All(perSecond, perDay)
	if err != nil {
		panic(err)
	}
	r, err := both.Reserve(context.Background(), "api.example.com", 1, time.Minute)
	if err != nil || !r.OK {
		return // refused, or Redis is away
	}
	_ = r.Wait(context.Background())
}

// With FailClosed, the default, nothing is sent while Redis is away.
func ExampleFailClosed() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	l, _ := redislimit.NewTokenBucket(rdb, throttle.PerSecond(10), 10)
	defer l.Close()
	_, err := l.Reserve(context.Background(), "k", 1, 0)
	fmt.Println(errors.Is(err, redislimit.ErrUnavailable))
	// Output: true
}

// Fallback takes units from a local limiter while Redis is away. With N
// processes, give it rate/N.
func ExampleFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	const workers = 4
	local, _ := throttle.NewTokenBucket(throttle.PerSecond(200/workers), 10/workers)
	l, _ := redislimit.NewTokenBucket(rdb, throttle.PerSecond(200), 10,
		redislimit.WithFailurePolicy(redislimit.Fallback(local)))
	defer l.Close()
	for range 3 {
		ok, err := throttle.Allow(context.Background(), l, "k", 1)
		fmt.Println(ok, err)
	}
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
}

// One Client per Redis client: the limiters on it share one circuit
// breaker and one pause subscription. This example needs a Redis to
// talk to, so it is not run.
func ExampleNewClient() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	client, err := redislimit.NewClient(rdb, redislimit.WithPrefix("myapp:"))
	if err != nil {
		panic(err)
	}
	defer client.Close() // after the limiters
	perSecond, _ := redislimit.NewTokenBucket(rdb, throttle.PerSecond(20), 20, redislimit.WithClient(client))
	perDay, _ := redislimit.NewFixedWindow(rdb, 10_000, 24*time.Hour, redislimit.WithClient(client))
	both, _ := redislimit.All(perSecond, perDay)
	st, err := both.Inspect(context.Background(), "api.example.com")
	if err == nil {
		fmt.Println(st.Remaining, st.Next)
	}
}
