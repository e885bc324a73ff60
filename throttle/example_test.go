package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/egress-go/egress/throttle"
)

func ExampleNewTokenBucket() {
	// A clock that moves only when told to, so the output is the same on
	// every run. Real code leaves WithClock out.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	// 2 per second, with bursts of up to 3.
	tb, err := throttle.NewTokenBucket(throttle.PerSecond(2), 3, throttle.WithClock(clock))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 4 {
		ok, _ := throttle.Allow(ctx, tb, "api.example.com", 1)
		fmt.Println("allowed:", ok)
	}
	r, _ := tb.Reserve(ctx, "api.example.com", 1, -1)
	fmt.Println("next slot in", r.Delay)

	now = now.Add(time.Second)
	r, _ = tb.Reserve(ctx, "api.example.com", 1, 0)
	fmt.Println("a second later:", r.OK, r.Remaining)
	// Output:
	// allowed: true
	// allowed: true
	// allowed: true
	// allowed: false
	// next slot in 500ms
	// a second later: true 0
}

func ExampleNewLeakyBucket() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	// Mirrors an nginx upstream with `limit_req rate=10r/s burst=2`:
	// 1+2 at once, then one every 100ms. Nobody is refused within the
	// max wait (here 250ms): the line is the max wait's business.
	lb, err := throttle.NewLeakyBucket(throttle.PerSecond(10), 2, throttle.WithClock(clock))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 6 {
		r, _ := lb.Reserve(context.Background(), "api.example.com", 1, 250*time.Millisecond)
		if !r.OK {
			fmt.Println("refused, retry after", r.Delay)
			continue
		}
		fmt.Println("go in", r.Delay)
	}
	// Output:
	// go in 0s
	// go in 0s
	// go in 0s
	// go in 100ms
	// go in 200ms
	// refused, retry after 50ms
}

func ExampleAll() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	// At most 10 per second, and at most 3 per day.
	perSecond, _ := throttle.NewTokenBucket(throttle.PerSecond(10), 1, throttle.WithClock(clock))
	perDay, _ := throttle.NewTokenBucket(throttle.PerDay(3), 3, throttle.WithClock(clock))
	both := throttle.All(perSecond, perDay)

	for range 4 {
		r, _ := both.Reserve(context.Background(), "api.example.com", 1, -1)
		fmt.Println("go in", r.Delay)
	}

	_, err := throttle.All().Reserve(context.Background(), "api.example.com", 1, -1)
	fmt.Println(err)
	// Output:
	// go in 0s
	// go in 100ms
	// go in 200ms
	// go in 8h0m0s
	// throttle: All has no limiters
}

func ExampleRoute() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	free, _ := throttle.NewTokenBucket(throttle.PerDay(100), 1, throttle.WithClock(clock))
	pro, _ := throttle.NewTokenBucket(throttle.PerMinute(600), 10, throttle.WithClock(clock))
	tiers := throttle.Route(func(key string) throttle.Limiter {
		if strings.HasPrefix(key, "pro:") {
			return pro
		}
		return free
	})

	ctx := context.Background()
	for _, key := range []string{"free:alice", "free:alice", "pro:bob", "pro:bob"} {
		ok, _ := throttle.Allow(ctx, tiers, key, 1)
		fmt.Println(key, ok)
	}
	// Output:
	// free:alice true
	// free:alice false
	// pro:bob true
	// pro:bob true
}

func ExampleWait() {
	tb, err := throttle.NewTokenBucket(throttle.PerMinute(1), 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The first unit is free now, so Wait returns at once.
	fmt.Println(throttle.Wait(context.Background(), tb, "api.example.com", 1))

	// The next one is a minute away: past this deadline, so Wait fails
	// at once instead of sleeping just to fail, and takes nothing.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = throttle.Wait(ctx, tb, "api.example.com", 1)
	var le *throttle.LimitError
	if errors.As(err, &le) {
		fmt.Println(errors.Is(err, throttle.ErrLimitExceeded), le.Timeout(), le.RetryAfter.Round(time.Second))
	}
	// Output:
	// <nil>
	// true true 59s
}

func ExampleAllow() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	tb, _ := throttle.NewTokenBucket(throttle.PerSecond(1), 2, throttle.WithClock(clock))

	for range 3 {
		ok, err := throttle.Allow(context.Background(), tb, "api.example.com", 1)
		fmt.Println(ok, err)
	}
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
}

func ExampleRate_String() {
	fmt.Println(throttle.PerSecond(10))
	fmt.Println(throttle.PerMinute(600))
	fmt.Println(throttle.PerHour(5000))
	fmt.Println(throttle.PerDay(100))
	fmt.Println(throttle.Rate{N: 5, Per: 1500 * time.Millisecond})
	// Output:
	// 10/s
	// 600/min
	// 5000/h
	// 100/24h
	// 5/1.5s
}

func ExampleReservation_Cancel() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	tb, _ := throttle.NewTokenBucket(throttle.PerSecond(1), 1, throttle.WithClock(clock))
	ctx := context.Background()

	_, _ = throttle.Allow(ctx, tb, "api.example.com", 1)
	r, _ := tb.Reserve(ctx, "api.example.com", 1, -1)
	fmt.Println("booked in", r.Delay)

	// The caller gave up before its slot. It was the latest booking, so
	// the slot goes to the next caller.
	_ = r.Cancel(ctx)
	r, _ = tb.Reserve(ctx, "api.example.com", 1, -1)
	fmt.Println("next caller in", r.Delay)
	// Output:
	// booked in 1s
	// next caller in 1s
}

func ExampleWithTolerance() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	// The upstream allows 50/s with bursts of 5. Keep enough in reserve
	// that 10ms of jitter on the way cannot push requests over it.
	tb, _ := throttle.NewTokenBucket(throttle.PerSecond(50), 5,
		throttle.WithClock(clock), throttle.WithTolerance(throttle.DefaultTolerance))
	admitted := 0
	for range 10 {
		if ok, _ := throttle.Allow(context.Background(), tb, "api.example.com", 1); ok {
			admitted++
		}
	}
	fmt.Println("admitted at once:", admitted)
	// Output:
	// admitted at once: 4
}

func ExampleTokenBucket_Pause() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	tb, _ := throttle.NewTokenBucket(throttle.PerSecond(1), 1, throttle.WithClock(clock))
	ctx := context.Background()

	// The upstream answered 429 with Retry-After: 30.
	_ = tb.Pause(ctx, "api.example.com", 30*time.Second)
	r, _ := tb.Reserve(ctx, "api.example.com", 1, -1)
	fmt.Println("go in", r.Delay)

	// A shorter pause changes nothing: pauses do not add up.
	_ = tb.Pause(ctx, "api.example.com", 10*time.Second)
	r, _ = tb.Reserve(ctx, "api.example.com", 1, -1)
	fmt.Println("then in", r.Delay)
	// Output:
	// go in 30s
	// then in 31s
}

func ExampleTokenBucket_Inspect() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 5, throttle.WithClock(clock))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 7 {
		_, _ = tb.Reserve(ctx, "api.example.com", 1, -1)
	}
	// The upstream answered 429 with Retry-After: 1.
	_ = tb.Pause(ctx, "api.example.com", time.Second)

	// 7 booked in a burst of 5 leave none now; with the pause, the
	// bucket is booked 1.7s ahead (17 units' worth), and one more unit
	// fits 1.3s from now.
	st, _ := tb.Inspect(ctx, "api.example.com")
	fmt.Printf("remaining %d, next in %v, %d ahead, paused for %v\n", st.Remaining, st.Next, st.Ahead, st.Paused)
	// Output:
	// remaining 0, next in 1.3s, 17 ahead, paused for 1s
}
