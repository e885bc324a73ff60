package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/egress-go/egress/throttle"
)

func ExampleNewXRate() {
	// A rate.Limiter the program already has: one call an hour.
	hourly := rate.NewLimiter(rate.Every(time.Hour), 1)

	// Every key shares it.
	l := throttle.NewXRate(hourly)
	ctx := context.Background()
	ok, _ := throttle.Allow(ctx, l, "api.example.com", 1)
	fmt.Println("first:", ok)

	r, _ := l.Reserve(ctx, "other.example.com", 1, 0)
	fmt.Println("second:", r.OK, "retry after about", r.Delay.Round(time.Minute))

	_, err := l.Reserve(ctx, "api.example.com", 2, -1)
	fmt.Println(errors.Is(err, throttle.ErrExceedsCapacity))
	// Output:
	// first: true
	// second: false retry after about 1h0m0s
	// true
}

func ExampleRateFromLimit() {
	for _, l := range []rate.Limit{50, rate.Every(2 * time.Second), 2.5} {
		r, err := throttle.RateFromLimit(l)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(r)
	}
	_, err := throttle.RateFromLimit(rate.Inf)
	fmt.Println(err)
	// Output:
	// 50/s
	// 1/2s
	// 1/400ms
	// throttle: rate.Limit is rate.Inf, which has no Rate
}

func ExampleRate_Limit() {
	l, err := throttle.PerMinute(120).Limit()
	if err != nil {
		fmt.Println(err)
		return
	}
	// A rate.Limiter that paces like a throttle.TokenBucket of 120/min.
	rl := rate.NewLimiter(l, 1)
	fmt.Println(rl.Limit())
	// Output:
	// 2
}

func ExampleRateEvery() {
	r, err := throttle.RateEvery(250 * time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r)
	// Output:
	// 1/250ms
}
