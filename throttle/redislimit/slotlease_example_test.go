package redislimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// A hot budget shared by many processes: each leases about 100 ms of its
// demand at a time, so most calls make no round trip, and takes its
// share of the budget while Redis is away. The bucket keeps 100 ms of
// units (200) of its burst in reserve. This example needs a Redis to
// talk to, so it is not run.
func ExampleWithSlotLease() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	l, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(2000), 400,
		redislimit.WithSlotLease(100*time.Millisecond), redislimit.WithFailurePolicy(redislimit.FailShare))
	if err != nil {
		panic(err)
	}
	defer l.Close() // gives back the unused tail of the lease
	if err := throttle.Wait(context.Background(), l, "api.example.com", 1); err != nil {
		panic(err)
	}
	// send the request
}

// A lease keeps span's worth of units of the burst in reserve, so the
// burst must be larger.
func ExampleWithSlotLease_burst() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	_, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(100), 10, redislimit.WithSlotLease(time.Second))
	fmt.Println(err)
	// Output: redislimit: WithSlotLease of 1s keeps 100 units in reserve, more than the burst of 10 allows; shorten it or raise the burst
}
