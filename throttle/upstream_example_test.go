package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/egress-go/egress/throttle"
)

// A response said "2 more before the reset in 500 ms, then 4 per second":
// the record books two units now, then spaces the rest evenly from the
// reset on. It never moves units already booked.
func ExampleUpstream() {
	clk := newManualClock()
	u, err := throttle.NewUpstream(throttle.WithClock(clk.Now))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	_ = u.Learn(ctx, "api.example.com", throttle.Outcome{Statements: []throttle.Statement{{
		Name: "requests", Unit: throttle.UnitRequests, Limit: 4, Remaining: 2,
		Reset: 500 * time.Millisecond, Window: time.Second,
	}}})
	for range 5 {
		r, err := u.Reserve(ctx, "api.example.com", 1, -1)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(r.Delay)
	}
	// Output:
	// 0s
	// 0s
	// 500ms
	// 750ms
	// 1s
}

// An Adaptive limiter starts at its ceiling and cuts when the upstream
// throttles; a stated limit and window replace its estimate at once.
func ExampleAdaptive() {
	clk := newManualClock()
	a, err := throttle.NewAdaptive(throttle.PerSecond(100), throttle.WithClock(clk.Now))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	fmt.Printf("%.0f/s\n", a.Rate("api.example.com"))

	_ = a.Learn(ctx, "api.example.com", throttle.Outcome{N: 1, Throttled: true})
	fmt.Printf("%.0f/s after a 429\n", a.Rate("api.example.com"))

	_ = a.Learn(ctx, "api.example.com", throttle.Outcome{N: 1, Statements: []throttle.Statement{{
		Name: "default", Unit: throttle.UnitRequests, Limit: 600, Remaining: 599, Reset: time.Minute, Window: time.Minute,
	}}})
	fmt.Printf("%.0f/s once the upstream states 600 per minute\n", a.Rate("api.example.com"))
	// Output:
	// 100/s
	// 70/s after a 429
	// 10/s once the upstream states 600 per minute
}

// An LLM API said its output tokens refill like a token bucket: 400 of
// 1 000 left, full again in 600 ms (so 1 000 per second). Each call books
// 1 request and its max_tokens of output: the record lets the first
// through at once and the others as the bucket refills.
func ExampleUpstream_ReserveUnits() {
	clk := newManualClock()
	u, err := throttle.NewUpstream(throttle.WithClock(clk.Now))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	_ = u.Learn(ctx, "api.example.com", throttle.Outcome{Statements: []throttle.Statement{{
		Name: "output-tokens", Unit: "output-tokens", Limit: 1000, Remaining: 400,
		Reset: 600 * time.Millisecond, Refills: true,
	}}})
	for range 3 {
		r, err := u.ReserveUnits(ctx, "api.example.com", 1, map[string]int{"output-tokens": 400}, 0, -1)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(r.Delay)
	}
	// Output:
	// 0s
	// 400ms
	// 800ms
}
