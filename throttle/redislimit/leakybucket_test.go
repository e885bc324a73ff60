package redislimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestLeakyBucketIsNginxBurst checks the capacity's meaning: what nginx's
// limit_req burst=capacity admits, a token bucket of capacity+1, and no
// refusal of a caller whose slot lies within its max wait.
func TestLeakyBucketIsNginxBurst(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	tests := []struct {
		name         string
		giveRate     throttle.Rate
		giveCapacity int
		giveTol      time.Duration
		giveN        int           // reservations, one unit each, at one instant
		giveMaxWait  time.Duration // of each
		wantAtOnce   int           // how many get Delay 0
		wantLast     time.Duration // the last one's Delay
	}{
		{"strict spacing", throttle.PerSecond(10), 0, 0, 5, -1, 1, 400 * ms},
		// 591 intervals of 1/48 s rounded up to the ns (20 833 334 ns), the
		// slot rounded up to the µs.
		{"burst 8 at 48/s", throttle.PerSecond(48), 8, 0, 600, 30 * time.Second, 9, (591*20_833_334*time.Nanosecond + time.Microsecond - 1).Truncate(time.Microsecond)},
		{"tolerance spares capacity", throttle.PerSecond(100), 4, 15 * ms, 5, -1, 3, 20 * ms},
		{"tolerance lengthens the interval", throttle.PerSecond(100), 0, 5 * ms, 3, -1, 1, 30 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(0)
			l, err := NewLeakyBucket(rdb, tt.giveRate, tt.giveCapacity, c.option(), WithTolerance(tt.giveTol))
			require.NoError(t, err)
			closeAll(t, l)
			atOnce := 0
			var last *throttle.Reservation
			for i := range tt.giveN {
				last = reserve(t, l, t.Name(), 1, tt.giveMaxWait)
				require.True(t, last.OK, "reservation %d is within its max wait", i)
				if last.Delay == 0 {
					atOnce++
				}
			}
			assert.Equal(t, tt.wantAtOnce, atOnce)
			assert.Equal(t, tt.wantLast, last.Delay)
		})
	}
}
