package redislimit

import (
	"context"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestWindowedLargeLimits checks daily limits whose counts times the
// window in microseconds pass 2^53, where the script's doubles stop
// being exact: the whole limit fits in one day, one unit more is refused
// until the next, and the sliding counter's estimate then decides as in
// process, to the microsecond, through the next day.
func TestWindowedLargeLimits(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb := s.client(t)
	day := 24 * time.Hour
	builds := []struct {
		name  string
		build func(rdb redis.Scripter, c *clock, limit int) (throttle.Limiter, throttle.Limiter)
	}{
		{name: "fixed window", build: func(rdb redis.Scripter, c *clock, limit int) (throttle.Limiter, throttle.Limiter) {
			r, err := NewFixedWindow(rdb, limit, day, c.option())
			require.NoError(t, err)
			l, _ := throttle.NewFixedWindow(limit, day, throttle.WithClock(c.now))
			return r, l
		}},
		{name: "sliding window counter", build: func(rdb redis.Scripter, c *clock, limit int) (throttle.Limiter, throttle.Limiter) {
			r, err := NewSlidingWindowCounter(rdb, limit, day, c.option())
			require.NoError(t, err)
			l, _ := throttle.NewSlidingWindowCounter(limit, day, throttle.WithClock(c.now))
			return r, l
		}},
	}
	for _, b := range builds {
		for _, tc := range []struct {
			limit int
			prev  uint64   // units the first day
			rests []uint64 // µs left in the next day where prev×rest/window turns
			rooms []uint64 // room left the next day where room×window/prev turns
		}{
			// Found by search (math.ceil and math.floor of the doubles
			// differ from exact there), and whole quotients.
			{limit: 1_000_000, prev: 999_995, rests: []uint64{17_280_000_000, 69_120_000_000}, rooms: []uint64{199_999, 799_996}},
			{limit: 1_000_000_000, prev: 892_114_486, rests: []uint64{47_025_072_760, 17_280_000_000}, rooms: []uint64{485_552_646, 178_422_897}},
		} {
			limit := tc.limit
			t.Run(fmt.Sprintf("%s/%d a day", b.name, limit), func(t *testing.T) {
				c := newClock(0)
				remote, local := b.build(rdb, c, limit)
				closeAll(t, remote.(interface{ Close() error }))
				key := t.Name()
				both := func(what string, n int) {
					t.Helper()
					want := reserve(t, local, key, n, 0)
					got := reserve(t, remote, key, n, 0)
					assert.Equal(t, want.OK, got.OK, "%s: OK", what)
					assert.InDelta(t, want.Delay, got.Delay, float64(time.Microsecond), "%s: Delay", what)
					assert.Equal(t, want.Remaining, got.Remaining, "%s: Remaining", what)
				}
				prev := tc.prev
				both("prev units at once", int(prev))
				c.advance(day / 2)
				over := limit - int(prev) + 1
				r := reserve(t, remote, key, over, 0)
				assert.False(t, r.OK, "one more than the limit the same day")
				both("one more than the limit the same day", over)

				if b.name != "sliding window counter" {
					return
				}
				// The next day, with prev units the day before, where a
				// double's rounding error of the product turns ceil and
				// floor. The process counts in nanoseconds, where these
				// points are not the same: the script is checked against
				// exact arithmetic instead.
				w := uint64(day.Microseconds())
				start := epoch.Add(day).UnixMicro()
				for _, room := range tc.rooms {
					c.us.Store(start)
					hi, lo := bits.Mul64(room, w)
					q, _ := bits.Div64(hi, lo, prev)
					r := reserve(t, remote, key, limit-int(room), 0)
					assert.False(t, r.OK)
					assert.Equal(t, time.Duration(w-1-q)*time.Microsecond, r.Delay, "room %d", room)
				}
				for _, rest := range tc.rests {
					c.us.Store(start + int64(w-1-rest))
					hi, lo := bits.Mul64(prev, rest)
					q, rem := bits.Div64(hi, lo, w)
					if rem > 0 {
						q++
					}
					st, err := remote.(throttle.Inspector).Inspect(context.Background(), key)
					require.NoError(t, err)
					assert.Equal(t, limit-int(q), st.Remaining, "rest %d", rest)
				}
			})
		}
	}
}
