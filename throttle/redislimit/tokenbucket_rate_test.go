package redislimit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/throttle"
)

// A token bucket at an LLM API's token rate refills at that rate: 30 000
// tokens a second is an interval of 33.3 µs, and 3 000 tokens past an
// empty bucket are due 100 ms later, not 102 ms (an interval rounded up
// to 34 µs). At 150M tokens per minute (2.5M/s, 0.4 µs) rounding up to
// 1 µs would refill at 40% of the rate.
func TestTokenBucketHighRateKeepsItsRate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		rate throttle.Rate
		n    int
		want time.Duration
	}{
		{"30k per second", throttle.Rate{N: 30_000, Per: time.Second}, 3_000, 100 * ms},
		{"150M per minute", throttle.Rate{N: 150_000_000, Per: time.Minute}, 250_000, 100 * ms},
		{"1e9 per second", throttle.Rate{N: 1_000_000_000, Per: time.Second}, 1_000_000, ms},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startRedis(t)
			clk := newClock(0)
			tb, err := NewTokenBucket(s.client(t), tt.rate, tt.rate.N, clk.option())
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			reserve(t, tb, "k", tt.rate.N, -1) // empty the bucket
			r := reserve(t, tb, "k", tt.n, -1)
			assert.InDelta(t, tt.want.Seconds(), r.Delay.Seconds(), 0.001, "delay of %d units past an empty bucket", tt.n)
		})
	}
}

// Many small bookings add their intervals up exactly too: 3 000 single
// units past an empty bucket at 30 000/s, the last due 100 ms later
// (102 ms were each rounded up to a whole µs), and at 150M/min, where the
// interval is 0.4 µs, 10 000 units in 4 ms. Slots are never early: each
// lies at or after the exact one.
func TestTokenBucketHighRateSmallBookings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		rate throttle.Rate
		n    int
	}{
		{"30k per second", throttle.PerSecond(30_000), 3_000},
		{"150M per minute", throttle.PerMinute(150_000_000), 10_000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startRedis(t)
			clk := newClock(0)
			tb, err := NewTokenBucket(s.client(t), tt.rate, 10, clk.option())
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			interval, _ := tt.rate.Interval()
			reserve(t, tb, "k", 10, -1) // empty the bucket
			var r *throttle.Reservation
			for i := 1; i <= tt.n; i++ {
				r = reserve(t, tb, "k", 1, -1)
				exact := time.Duration(i) * interval
				if r.Delay < exact || r.Delay >= exact+time.Microsecond {
					t.Fatalf("unit %d: Delay %v, want %v rounded up to a µs", i, r.Delay, exact)
				}
			}
		})
	}
}

// Leases at a rate whose interval is not a whole µs (33 334 ns) hand out
// slots that a GCRA of the configured rate, in nanoseconds, admits.
func TestSlotLeaseHighRate(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	clk := newClock(0)
	rate := throttle.PerSecond(30_000)
	procs := make([]*TokenBucket, 2)
	for i := range procs {
		c, err := NewClient(rdb, clk.option())
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewTokenBucket(rdb, rate, 200, WithClient(c), WithSlotLease(ms))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = l.Close()
			_ = c.Close()
		})
		procs[i] = l
	}
	var admitted []int64
	ctx := context.Background()
	for range 2000 {
		for _, l := range procs {
			for range 4 {
				r, err := l.Reserve(ctx, "api", 1, 20*ms)
				if err != nil {
					t.Fatal(err)
				}
				if r.OK {
					admitted = append(admitted, clk.us.Load()*1000+r.Delay.Nanoseconds())
				}
			}
			settle(l)
		}
		clk.advance(100 * time.Microsecond)
	}
	slices.Sort(admitted)
	interval, _ := rate.Interval()
	assert.Equal(t, -1, conforms(admitted, int64(interval), 200), "a unit went out where the configured bucket would refuse it")
	// Slots up to 220 ms (200 ms and the max wait): at most 6 600 units
	// and the burst; a 34 µs interval would allow at most 6 670.
	assert.GreaterOrEqual(t, len(admitted), 6_700, "units admitted in 200 ms at 30 000/s, burst 200")
}
