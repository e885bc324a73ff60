package redislimit_test

import (
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// An LLM API's output-token bucket, shared by every worker, follows the
// upstream's headers: tokens another client spends from the same API key
// tighten it for the whole fleet, in the script calls the workers make
// anyway. This example needs a Redis to talk to, so it is not run.
func ExampleWithStated() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	rl, err := redislimit.NewClient(rdb)
	if err != nil {
		panic(err)
	}
	defer rl.Close()
	rpm, _ := redislimit.NewTokenBucket(rdb, throttle.PerMinute(4000), 4000, redislimit.WithClient(rl))
	otpm, _ := redislimit.NewTokenBucket(rdb, throttle.Rate{N: 400_000, Per: time.Minute}, 400_000,
		redislimit.WithClient(rl), redislimit.WithStated("output-tokens"))
	budget, err := redislimit.All(rpm, otpm)
	if err != nil {
		panic(err)
	}
	client := egress.NewClient(egress.WithLimiter(budget), egress.WithEstimate(func(*http.Request) ([]int, error) {
		return []int{1, 1024}, nil // 1 request, max_tokens output tokens
	}))
	_ = client // client.Do(req), then egress.Settle(resp, 1, usage.OutputTokens)
}
