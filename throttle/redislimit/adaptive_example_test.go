package redislimit_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// Every worker of a fleet calls an API whose limit nobody published: they
// learn it together. One worker's 429 slows them all, in the script call
// it makes next anyway. This example needs a Redis to talk to, so it is
// not run.
func ExampleNewAdaptive() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	learned, err := redislimit.NewAdaptive(rdb, throttle.PerSecond(1000), // a ceiling, not a guess
		redislimit.WithFloor(throttle.PerSecond(2)))
	if err != nil {
		panic(err)
	}
	defer learned.Close()
	client := egress.NewClient(egress.WithLimiter(learned), egress.WithRetry(retryafter.Policy{}))
	_ = client // client.Do(req); learned.Rate("api.example.com") is the fleet's rate as last heard
}
