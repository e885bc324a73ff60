package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/egress-go/egress/throttle"
)

// An LLM API limits requests, input tokens and output tokens per minute.
// Each call books 1 request, its input estimate and its max_tokens at one
// common slot, then settles to the usage the response reports.
func ExamplePartsReserver() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	rpm, _ := throttle.NewTokenBucket(throttle.PerMinute(50), 50, throttle.WithClock(clock))
	itpm, _ := throttle.NewTokenBucket(throttle.PerMinute(40_000), 40_000, throttle.WithClock(clock))
	otpm, _ := throttle.NewTokenBucket(throttle.PerMinute(8_000), 8_000, throttle.WithClock(clock))
	budget := throttle.All(rpm, itpm, otpm).(throttle.PartsReserver) // parts in this order

	ctx := context.Background()
	for i := range 3 {
		// 1 request, ~1 200 input tokens, max_tokens 4 000.
		r, err := budget.ReserveParts(ctx, "api.anthropic.com", []int{1, 1_200, 4_000}, time.Minute)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("call %d: slot in %v\n", i, r.Delay)
		// ... Wait, send, read usage from the response ...
		_ = r.Settle(ctx, 1, 1_150, 900) // the output came to 900 of 4 000
	}
	// Output:
	// call 0: slot in 0s
	// call 1: slot in 0s
	// call 2: slot in 0s
}

// Without Settle, the third call would wait for output tokens that the
// first two never used.
func ExampleReservation_Settle() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	tokens, _ := throttle.NewTokenBucket(throttle.PerMinute(8_000), 8_000, throttle.WithClock(clock))
	ctx := context.Background()

	r1, _ := tokens.Reserve(ctx, "api", 4_000, time.Minute)
	r2, _ := tokens.Reserve(ctx, "api", 4_000, time.Minute)
	fmt.Println("booked:", r1.Delay, r2.Delay)

	now = now.Add(10 * time.Second) // the responses come back
	fmt.Println(r1.Settle(ctx, 900), r2.Settle(ctx, 1_300))

	r3, _ := tokens.Reserve(ctx, "api", 4_000, time.Minute)
	fmt.Println("third call:", r3.OK, r3.Delay)

	err := r3.Settle(ctx, 9_000) // more than the bucket holds: charged, and said
	fmt.Println(err)
	// Output:
	// booked: 0s 0s
	// <nil> <nil>
	// third call: true 0s
	// throttle: key "api" settled at 9000 units, charged: throttle: n exceeds the limiter's capacity: n is 9000, at most 8000 fit
}
