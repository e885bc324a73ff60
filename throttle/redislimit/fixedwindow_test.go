package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestFixedWindowTolerance checks what WithTolerance's doc says: a unit
// is still booked in the last d of a window, and counts against the next
// window too.
func TestFixedWindowTolerance(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	c := newClock(time.Minute - 400*ms) // 400 ms before a reset
	l, err := NewFixedWindow(rdb, 2, time.Minute, c.option(), WithTolerance(800*ms))
	require.NoError(t, err)
	closeAll(t, l)

	now := reserve(t, l, "k", 1, -1)
	require.True(t, now.OK)
	assert.Equal(t, time.Duration(0), now.Delay, "booked in the last d of the window")
	next := reserve(t, l, "k", 1, -1)
	assert.Equal(t, time.Duration(0), next.Delay)
	assert.Equal(t, 0, next.Remaining)

	c.advance(400 * ms) // the next window
	spent := reserve(t, l, "k", 1, -1)
	assert.Equal(t, time.Minute, spent.Delay, "the two units count in this window too")
}

// TestFixedWindowResetsOnTime: a window with room takes its first unit at
// its reset, whatever is still booked ahead in the window before it
// (issue 11, item 1, as Redis must do it too).
func TestFixedWindowResetsOnTime(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	ctx := context.Background()
	tests := []struct {
		name       string
		giveAt     time.Duration // from midnight
		giveBucket bool          // All with a token bucket of 2/s, burst 1
		giveLimit  int
		givePause  time.Duration // before the reservations
		giveN      int
		want       []time.Duration
	}{
		{"daily quota under a bucket", -2 * time.Second, true, 2, 0, 4, []time.Duration{0, 500 * ms, 2 * time.Second, 2500 * ms}},
		{"after a pause", -10 * time.Second, false, 3, 5 * time.Second, 4, []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second, 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(24*time.Hour + tt.giveAt)
			var l throttle.Limiter
			day, err := NewFixedWindow(rdb, tt.giveLimit, 24*time.Hour, c.option())
			require.NoError(t, err)
			closeAll(t, day)
			l = day
			if tt.giveBucket {
				bucket, err := NewTokenBucket(rdb, throttle.PerSecond(2), 1, c.option())
				require.NoError(t, err)
				closeAll(t, bucket)
				l, err = All(bucket, day)
				require.NoError(t, err)
			}
			if tt.givePause > 0 {
				require.NoError(t, l.(throttle.Pauser).Pause(ctx, t.Name(), tt.givePause))
			}
			var got []time.Duration
			for range tt.giveN {
				r := reserve(t, l, t.Name(), 1, -1)
				require.True(t, r.OK)
				got = append(got, r.Delay)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestFixedWindowPauseAcrossTheReset: a pause that carries units across a
// reset into a window that then holds too many pushes the latest-booked
// of them on to the next reset, in Redis as in process, and every
// process's sleepers follow (issue 11, item 2).
func TestFixedWindowPauseAcrossTheReset(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	rdb, other := s.client(t), s.client(t)
	ctx := context.Background()
	tests := []struct {
		name       string
		giveWindow time.Duration
		giveAt     time.Duration // from a reset
		giveBucket bool          // All with a token bucket of 2/s, burst 1
		giveFirst  time.Duration // a pause before the reservations
		giveN      int
		giveAfter  time.Duration // time passing before the second pause
		givePause  time.Duration
		want       []time.Duration // when each booking is due, from giveAt
	}{
		{
			// 4 s windows of 2, the reset B 1 s away: two at B-0.5s, two
			// at B; the second pause carries them all into B's window.
			name: "issue 11 item 2", giveWindow: 4 * time.Second, giveAt: 3 * time.Second,
			giveFirst: 500 * ms, giveN: 4, givePause: 1200 * ms,
			want: []time.Duration{1200 * ms, 1200 * ms, 5 * time.Second, 5 * time.Second},
		},
		{
			// Units at 23:59:58 (due), 23:59:58.5, 00:00:00 and
			// 00:00:00.5; a pause at 23:59:58.1 for 1.95 s.
			name: "daily quota under a bucket", giveWindow: 24 * time.Hour, giveAt: 24*time.Hour - 2*time.Second, giveBucket: true,
			giveN: 4, giveAfter: 100 * ms, givePause: 1950 * ms,
			want: []time.Duration{0, 2450 * ms, 3950 * ms, 24*time.Hour + 2*time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(tt.giveAt)
			start := c.now()
			parts := func(rdb redis.Scripter) throttle.Limiter {
				day, err := NewFixedWindow(rdb, 2, tt.giveWindow, c.option())
				require.NoError(t, err)
				closeAll(t, day)
				if !tt.giveBucket {
					return day
				}
				bucket, err := NewTokenBucket(rdb, throttle.PerSecond(2), 1, c.option())
				require.NoError(t, err)
				closeAll(t, bucket)
				both, err := All(bucket, day)
				require.NoError(t, err)
				return both
			}
			mine, theirs := parts(rdb), parts(other)
			key := t.Name()
			if tt.giveFirst > 0 {
				require.NoError(t, mine.(throttle.Pauser).Pause(ctx, key, tt.giveFirst))
			}
			var bs []*booking
			for i := range tt.giveN {
				l := mine
				if i%2 == 1 {
					l = theirs // the other process
				}
				bs = append(bs, book(t, l.(Part), key, 1))
			}
			c.advance(tt.giveAfter)
			// A booking due by now has been sent: its Wait returned.
			sent := map[*booking]time.Duration{}
			for _, b := range bs {
				if b.Until() <= 0 {
					sent[b] = c.now().Sub(start) + b.Until()
				}
			}
			require.NoError(t, mine.(throttle.Pauser).Pause(ctx, key, tt.givePause))
			due := func() []time.Duration {
				var ds []time.Duration
				for _, b := range bs {
					d, ok := sent[b]
					if !ok {
						d = c.now().Sub(start) + b.Until()
					}
					ds = append(ds, d)
				}
				return ds
			}
			assert.Eventually(t, func() bool { // pub/sub reaches the other
				return assert.ObjectsAreEqual(tt.want, due())
			}, 5*time.Second, 5*ms)
			assert.Equal(t, tt.want, due())
			// No aligned window holds more than the limit, by due time.
			perWindow := map[time.Duration]int{}
			for _, d := range due() {
				w := (start.Sub(epoch) + d) / tt.giveWindow
				perWindow[w]++
				assert.LessOrEqual(t, perWindow[w], 2, "window %d", w)
			}
		})
	}
}

// TestFixedWindowModel runs random reservations, cancels, pauses and
// waits on a fixed window, alone and under a token bucket, and checks
// the rule both packages share: by the time each booking is actually due
// (pauses included), no aligned window holds more than its limit, a unit
// in a window's last tolerance counting in the next one too.
func TestFixedWindowModel(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).client(t)
	ctx := context.Background()
	const window, limit = 4 * time.Second, 3
	tests := []struct {
		name       string
		giveTol    time.Duration
		giveBucket bool
	}{
		{"alone", 0, false},
		{"with tolerance", 300 * ms, false},
		{"under a bucket", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(20) {
				rng := rand.New(rand.NewPCG(seed, 7))
				c := newClock(time.Duration(rng.Int64N(int64(window))))
				fw, err := NewFixedWindow(rdb, limit, window, c.option(), WithTolerance(tt.giveTol))
				require.NoError(t, err)
				var l Part = fw
				if tt.giveBucket {
					tb, err := NewTokenBucket(rdb, throttle.PerSecond(2), limit, c.option())
					require.NoError(t, err)
					l, err = All(tb, fw)
					require.NoError(t, err)
					defer tb.Close()
				}
				key := fmt.Sprintf("%s-%d", t.Name(), seed)
				type unit struct {
					b         *booking
					n         int
					sent      bool
					due       time.Time
					cancelled bool
				}
				var units []*unit
				settle := func() { // a booking due by now is sent
					for _, u := range units {
						if !u.sent && !u.cancelled && u.b.Until() <= 0 {
							u.sent, u.due = true, c.now().Add(u.b.Until())
						}
					}
				}
				for range 40 {
					switch op := rng.IntN(10); {
					case op < 5:
						n := 1 + rng.IntN(limit)
						units = append(units, &unit{b: book(t, l, key, n), n: n})
					case op < 6 && len(units) > 0:
						u := units[rng.IntN(len(units))]
						if !u.sent && !u.cancelled {
							require.NoError(t, u.b.Cancel(ctx))
							u.cancelled = true
						}
					case op < 8:
						settle()
						require.NoError(t, l.part().Pause(ctx, key, time.Duration(rng.Int64N(int64(3*window)))))
					default:
						c.advance(time.Duration(rng.Int64N(int64(window))))
						settle()
					}
				}
				perWindow := map[int64]int{}
				for _, u := range units {
					if u.cancelled {
						continue
					}
					due := u.due
					if !u.sent {
						due = c.now().Add(u.b.Until())
					}
					w := due.UnixMicro() / window.Microseconds()
					perWindow[w] += u.n
					if tt.giveTol > 0 && due.Add(tt.giveTol).UnixMicro()/window.Microseconds() != w {
						perWindow[w+1] += u.n
					}
				}
				for w, n := range perWindow {
					assert.LessOrEqual(t, n, limit, "seed %d: window %d", seed, w)
				}
				require.NoError(t, fw.Close())
			}
		})
	}
}
