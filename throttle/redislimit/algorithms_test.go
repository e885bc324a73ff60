package redislimit

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

type step struct {
	advance time.Duration
	n       int
	maxWait time.Duration
}

// twins builds the same limit in Redis and in process.
type twins func(rdb redis.Scripter, c *clock) (throttle.Limiter, throttle.Limiter, error)

// TestAlgorithmsMatchInProcess runs each algorithm in Redis and in
// process side by side, on one frozen clock that the test moves, and
// checks that they decide alike, to the microsecond Redis counts in.
func TestAlgorithmsMatchInProcess(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	hit := func(n int) step { return step{n: n, maxWait: -1} }
	now := func(n int) step { return step{n: n} }
	later := func(d time.Duration, n int) step { return step{advance: d, n: n} }
	tests := []struct {
		name      string
		givePhase time.Duration // how far into a minute the clock starts
		give      twins
		giveSteps []step
	}{
		{
			name: "token bucket",
			give: func(rdb redis.Scripter, c *clock) (throttle.Limiter, throttle.Limiter, error) {
				r, err := NewTokenBucket(rdb, throttle.PerSecond(10), 3, c.option())
				l, _ := throttle.NewTokenBucket(throttle.PerSecond(10), 3, throttle.WithClock(c.now))
				return r, l, err
			},
			giveSteps: []step{now(1), now(1), now(1), now(1), hit(1), hit(2), later(250*time.Millisecond, 1), later(time.Second, 3), now(1)},
		},
		{
			name: "token bucket with tolerance",
			give: func(rdb redis.Scripter, c *clock) (throttle.Limiter, throttle.Limiter, error) {
				r, err := NewTokenBucket(rdb, throttle.PerSecond(100), 5, c.option(), WithTolerance(throttle.DefaultTolerance))
				l, _ := throttle.NewTokenBucket(throttle.PerSecond(100), 5, throttle.WithClock(c.now), throttle.WithTolerance(throttle.DefaultTolerance))
				return r, l, err
			},
			giveSteps: []step{now(2), now(2), now(1), hit(1), hit(1), later(100*time.Millisecond, 4)},
		},
		{
			// capacity 2 is what a token bucket of burst 3 admits.
			name: "leaky bucket",
			give: func(rdb redis.Scripter, c *clock) (throttle.Limiter, throttle.Limiter, error) {
				r, err := NewLeakyBucket(rdb, throttle.PerSecond(10), 2, c.option())
				l, _ := throttle.NewTokenBucket(throttle.PerSecond(10), 3, throttle.WithClock(c.now))
				return r, l, err
			},
			giveSteps: []step{hit(1), hit(1), hit(1), hit(1), later(100*time.Millisecond, 1), hit(1), later(time.Second, 3), hit(1)},
		},
		{
			name: "sliding log", givePhase: 100 * time.Millisecond,
			give: func(rdb redis.Scripter, c *clock) (throttle.Limiter, throttle.Limiter, error) {
				r, err := NewSlidingWindow(rdb, 3, time.Second, c.option())
				l, _ := throttle.NewSlidingWindow(3, time.Second, throttle.WithClock(c.now))
				return r, l, err
			},
			giveSteps: []step{now(1), later(200*time.Millisecond, 2), now(1), hit(1), hit(2), later(300*time.Millisecond, 1), hit(3), later(3*time.Second, 3)},
		},
		{
			name: "sliding window counter", givePhase: 200 * time.Millisecond,
			give: func(rdb redis.Scripter, c *clock) (throttle.Limiter, throttle.Limiter, error) {
				r, err := NewSlidingWindowCounter(rdb, 4, time.Second, c.option())
				l, _ := throttle.NewSlidingWindowCounter(4, time.Second, throttle.WithClock(c.now))
				return r, l, err
			},
			giveSteps: []step{now(4), now(1), hit(1), later(time.Second, 1), hit(2), hit(4), later(5*time.Second, 4)},
		},
		{
			name: "fixed window", givePhase: 10 * time.Second,
			give: func(rdb redis.Scripter, c *clock) (throttle.Limiter, throttle.Limiter, error) {
				r, err := NewFixedWindow(rdb, 3, time.Minute, c.option())
				l, _ := throttle.NewFixedWindow(3, time.Minute, throttle.WithClock(c.now))
				return r, l, err
			},
			giveSteps: []step{now(2), now(1), now(1), hit(2), hit(3), hit(1), later(2*time.Minute, 3)},
		},
		{
			name: "fixed window with offset and tolerance", givePhase: 20*time.Second - 5*time.Millisecond,
			give: func(rdb redis.Scripter, c *clock) (throttle.Limiter, throttle.Limiter, error) {
				opts := []Option{c.option(), WithWindowOffset(20 * time.Second), WithTolerance(throttle.DefaultTolerance)}
				r, err := NewFixedWindow(rdb, 3, time.Minute, opts...)
				l, _ := throttle.NewFixedWindow(3, time.Minute, throttle.WithClock(c.now), throttle.WithWindowOffset(20*time.Second), throttle.WithTolerance(throttle.DefaultTolerance))
				return r, l, err
			},
			giveSteps: []step{now(2), later(10*time.Millisecond, 2), hit(1), hit(2), later(time.Minute, 1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(tt.givePhase)
			remote, local, err := tt.give(rdb, c)
			require.NoError(t, err)
			closeAll(t, remote.(interface{ Close() error }))
			key := t.Name()
			for i, st := range tt.giveSteps {
				c.advance(st.advance)
				want := reserve(t, local, key, st.n, st.maxWait)
				got := reserve(t, remote, key, st.n, st.maxWait)
				assert.Equal(t, want.OK, got.OK, "step %d: OK", i)
				// Redis counts in microseconds, the process in nanoseconds.
				assert.InDelta(t, want.Delay, got.Delay, float64(time.Microsecond), "step %d: Delay", i)
				assert.Equal(t, want.Remaining, got.Remaining, "step %d: Remaining", i)
			}
		})
	}
}
