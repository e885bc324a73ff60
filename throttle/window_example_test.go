package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/egress-go/egress/throttle"
)

func ExampleNewSlidingWindow() {
	// A clock that moves only when told to, so the output is the same on
	// every run. Real code leaves WithClock out.
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	// At most 3 requests in any minute.
	w, err := throttle.NewSlidingWindow(3, time.Minute, throttle.WithClock(clock))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, after := range []time.Duration{0, 20 * time.Second, 20 * time.Second} {
		now = now.Add(after)
		r, _ := w.Reserve(ctx, "api.example.com", 1, 0)
		fmt.Println(now.Format("15:04:05"), "allowed:", r.OK, "remaining:", r.Remaining)
	}
	now = now.Add(10 * time.Second)
	r, _ := w.Reserve(ctx, "api.example.com", 1, -1)
	fmt.Println(now.Format("15:04:05"), "booked for", now.Add(r.Delay).Format("15:04:05"))
	// Output:
	// 12:00:00 allowed: true remaining: 2
	// 12:00:20 allowed: true remaining: 1
	// 12:00:40 allowed: true remaining: 0
	// 12:00:50 booked for 12:01:00
}

func ExampleNewSlidingWindowCounter() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	// About 100 requests in any minute, in 48 bytes per key.
	c, err := throttle.NewSlidingWindowCounter(100, time.Minute, throttle.WithClock(clock))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	ok, _ := throttle.Allow(ctx, c, "api.example.com", 100)
	fmt.Println("100 at 12:00:00:", ok)

	// A quarter into the next minute, the last minute's 100 still weigh
	// about 75.
	now = now.Add(75 * time.Second)
	r, _ := c.Reserve(ctx, "api.example.com", 30, 0)
	fmt.Println("30 more at 12:01:15:", r.OK, "retry after", r.Delay.Round(time.Second))
	r, _ = c.Reserve(ctx, "api.example.com", 25, 0)
	fmt.Println("25 more at 12:01:15:", r.OK)
	// Output:
	// 100 at 12:00:00: true
	// 30 more at 12:01:15: false retry after 3s
	// 25 more at 12:01:15: true
}

func ExampleNewFixedWindow() {
	now := time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC) // 15:00 in California
	clock := func() time.Time { return now }

	// A daily quota of 1000 that resets at midnight Pacific time
	// (08:00 UTC in winter).
	quota, err := throttle.NewFixedWindow(1000, 24*time.Hour,
		throttle.WithWindowOffset(8*time.Hour), throttle.WithClock(clock))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	ok, _ := throttle.Allow(ctx, quota, "maps.example.com", 1000)
	fmt.Println("spent the day's quota:", ok)

	// A batch job that may wait for the reset books its slot after it.
	r, _ := quota.Reserve(ctx, "maps.example.com", 10, -1)
	fmt.Println("next 10 at", now.Add(r.Delay).Format(time.RFC3339), "remaining", r.Remaining)
	// Output:
	// spent the day's quota: true
	// next 10 at 2026-01-02T08:00:00Z remaining 990
}

// A batch job against "2 per second and 3 per day" that runs into
// midnight: the day's last units go at the bucket's pace, and the next
// day's first unit at midnight, not a day later.
func ExampleAll_dailyQuota() {
	now := time.Date(2026, 1, 1, 23, 59, 58, 0, time.UTC)
	clock := func() time.Time { return now }
	perSecond, _ := throttle.NewTokenBucket(throttle.PerSecond(2), 1, throttle.WithClock(clock))
	perDay, _ := throttle.NewFixedWindow(3, 24*time.Hour, throttle.WithClock(clock))
	both := throttle.All(perSecond, perDay)

	for range 5 {
		r, _ := both.Reserve(context.Background(), "api.example.com", 1, time.Minute)
		fmt.Println(now.Add(r.Delay).Format("15:04:05.0"))
	}
	// Output:
	// 23:59:58.0
	// 23:59:58.5
	// 23:59:59.0
	// 00:00:00.0
	// 00:00:00.5
}

// A window set above what the upstream allows learns it from the
// refusals a Transport tells it of (here told by hand): of 10 units sent
// in a window, the upstream admitted 8.
func ExampleSlidingWindow_Learn() {
	ctx := context.Background()
	now := time.Unix(0, 0)
	w, err := throttle.NewSlidingWindow(10, time.Second, throttle.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	for range 10 {
		if _, err := w.AllowN(ctx, "api", 1); err != nil {
			panic(err)
		}
	}
	for i := range 10 { // the answers: the last two are 429s
		_ = w.Learn(ctx, "api", throttle.Outcome{N: 1, Throttled: i >= 8})
	}
	now = now.Add(time.Second)
	s, err := w.Inspect(ctx, "api")
	if err != nil {
		panic(err)
	}
	fmt.Println("room in the next window:", s.Remaining)
	// Output: room in the next window: 8
}
