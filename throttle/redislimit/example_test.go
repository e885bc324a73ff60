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

// An LLM API's requests, input tokens and output tokens per minute,
// shared by every worker: each call books 1 request, its input estimate
// and its max_tokens in one script call, and settles to the usage once
// the response is in. The settle rides on the key's next script call.
func ExampleComposite_ReserveParts() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	client, _ := redislimit.NewClient(rdb)
	defer client.Close() // sends the settles still queued
	rpm, _ := redislimit.NewTokenBucket(rdb, throttle.PerMinute(50), 50, redislimit.WithClient(client))
	itpm, _ := redislimit.NewTokenBucket(rdb, throttle.PerMinute(40_000), 40_000, redislimit.WithClient(client))
	otpm, _ := redislimit.NewTokenBucket(rdb, throttle.PerMinute(8_000), 8_000, redislimit.WithClient(client))
	budget, err := redislimit.All(rpm, itpm, otpm)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r, err := budget.ReserveParts(ctx, "api.anthropic.com", []int{1, 1200, 1024}, time.Minute)
	if err != nil || !r.OK {
		return // refused, or Redis is away
	}
	_ = r.Wait(ctx)
	// send the request, read the usage: 1180 tokens in, 310 out
	_ = r.Settle(ctx, 1, 1180, 310)
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
