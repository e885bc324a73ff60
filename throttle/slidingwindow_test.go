package throttle_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// windowedLimiter builds one of the three windowed limiters.
type windowedLimiter func(limit int, window time.Duration, opts ...throttle.Option) (throttle.Limiter, error)

// windowedLimiters lists the windowed constructors with the most units
// each lets into any interval of length window, as a function of limit.
var windowedLimiters = []struct {
	name  string
	build windowedLimiter
	bound func(limit int) int
}{
	{
		name: "SlidingWindow",
		build: func(limit int, window time.Duration, opts ...throttle.Option) (throttle.Limiter, error) {
			return throttle.NewSlidingWindow(limit, window, opts...)
		},
		bound: func(limit int) int { return limit },
	},
	{
		name: "SlidingWindowCounter",
		build: func(limit int, window time.Duration, opts ...throttle.Option) (throttle.Limiter, error) {
			return throttle.NewSlidingWindowCounter(limit, window, opts...)
		},
		bound: func(limit int) int { return 2*limit - 1 },
	},
	{
		name: "FixedWindow",
		build: func(limit int, window time.Duration, opts ...throttle.Option) (throttle.Limiter, error) {
			return throttle.NewFixedWindow(limit, window, opts...)
		},
		bound: func(limit int) int { return 2 * limit },
	},
}

func newSlidingWindow(t *testing.T, limit int, window time.Duration, opts ...throttle.Option) *throttle.SlidingWindow {
	t.Helper()
	w, err := throttle.NewSlidingWindow(limit, window, opts...)
	require.NoError(t, err)
	return w
}

// reserveAt reserves n units of key "k" with maxWait and returns the
// reservation and its slot as an offset from epoch.
func reserveAt(t *testing.T, l throttle.Limiter, clk *manualClock, n int, maxWait time.Duration) (*throttle.Reservation, time.Duration) {
	t.Helper()
	r, err := l.Reserve(context.Background(), "k", n, maxWait)
	require.NoError(t, err)
	return r, clk.Since() + r.Delay
}

// reserveStep is one call in a table of Reserve calls on key "k".
type reserveStep struct {
	giveAdvance time.Duration // how far to move the clock first
	giveN       int
	giveMaxWait time.Duration
	want        reserveWant
}

// reserveWant is what a reserveStep expects: slot is the booked slot when
// OK, and when the same call would succeed otherwise, as offsets from
// epoch.
type reserveWant struct {
	ok        bool
	slot      time.Duration
	remaining int
}

// runReserveSteps plays steps against l, moving clk as they say.
func runReserveSteps(t *testing.T, l throttle.Limiter, clk *manualClock, steps []reserveStep) {
	t.Helper()
	for i, st := range steps {
		clk.Advance(st.giveAdvance)
		r, slot := reserveAt(t, l, clk, st.giveN, st.giveMaxWait)
		assert.Equal(t, st.want, reserveWant{ok: r.OK, slot: slot, remaining: r.Remaining}, "step %d", i)
	}
}

// sends is units sent at instants, offsets from some origin.
type sends map[time.Duration]int

// total returns how many units were sent.
func (s sends) total() int {
	sum := 0
	for _, n := range s {
		sum += n
	}
	return sum
}

// aligned returns the most units sent in one window of a grid aligned
// to the Unix epoch, the origin being at Unix time origin.
func (s sends) aligned(window time.Duration, origin time.Time) int {
	phase := time.Duration(origin.UnixNano()) % window
	per := map[time.Duration]int{}
	most := 0
	for t, n := range s {
		i := (t + phase) / window
		per[i] += n
		most = max(most, per[i])
	}
	return most
}

// most returns the most units in any half-open interval (a, a+span].
func (s sends) most(span time.Duration) int {
	at := make([]time.Duration, 0, len(s))
	for t := range s {
		at = append(at, t)
	}
	slices.Sort(at)
	most, sum, j := 0, 0, 0
	for i := range at {
		sum += s[at[i]]
		for at[j] <= at[i]-span {
			sum -= s[at[j]]
			j++
		}
		most = max(most, sum)
	}
	return most
}

func TestSlidingWindowSaturatedRun(t *testing.T) {
	const limit, window = 50, time.Second
	clk := newManualClock()
	w := newSlidingWindow(t, limit, window, throttle.WithClock(clk.Now))

	slots := saturatedRun(t, w, clk, 4*limit, 50_000, 3*time.Millisecond)

	for _, span := range []time.Duration{0, time.Millisecond, window / 2, window - 1} {
		assert.LessOrEqual(t, maxInWindow(slots, span), limit, "units in any %v", span)
	}
	assert.Equal(t, limit, maxInWindow(slots, 0), "a full window goes at once")
	assertLongRunRate(t, throttle.Rate{N: limit, Per: window}, slots)
}

// TestWindowedUnderPressure books random amounts from many goroutines,
// cancels some, pauses the key now and then, and checks every interval
// of the units actually sent against the limiter's bound.
func TestWindowedUnderPressure(t *testing.T) {
	const limit, window = 20, time.Second
	for _, tt := range windowedLimiters {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, err := tt.build(limit, window)
				require.NoError(t, err)
				sent := underPressure(t, l, window)
				assert.LessOrEqual(t, sent.most(window), tt.bound(limit))
				assert.Greater(t, sent.total(), 10*limit, "the key kept moving")
			})
		})
	}
}

// underPressure runs in a synctest bubble for 40 windows: 30 goroutines
// reserve 1 to 4 units of key "k" of l with no bound on the wait, and
// cancel one reservation in 8 instead of waiting, while the key is paused
// for up to a window every few windows. It returns when each unit was
// sent, as offsets from the start.
func underPressure(t *testing.T, l throttle.Limiter, window time.Duration) sends {
	start := time.Now()
	var (
		mu   sync.Mutex
		sent = sends{}
		wg   sync.WaitGroup
	)
	ctx, stop := context.WithTimeout(context.Background(), 40*window)
	defer stop()
	for g := range 30 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for ctx.Err() == nil {
				n := 1 + rng.IntN(4)
				r, err := l.Reserve(ctx, "k", n, -1)
				if err != nil {
					return
				}
				if rng.IntN(8) == 0 {
					time.Sleep(time.Duration(rng.Int64N(int64(r.Delay) + 1)))
					assert.NoError(t, r.Cancel(context.Background()))
					continue
				}
				if r.Wait(ctx) != nil {
					return
				}
				mu.Lock()
				sent[time.Since(start)] += n
				mu.Unlock()
				time.Sleep(time.Duration(rng.Int64N(int64(window / 4))))
			}
		})
	}
	pauser := l.(throttle.Pauser)
	rng := rand.New(rand.NewPCG(99, 1))
	for ctx.Err() == nil {
		time.Sleep(time.Duration(rng.Int64N(int64(3 * window))))
		assert.NoError(t, pauser.Pause(context.Background(), "k", time.Duration(rng.Int64N(int64(window)))))
	}
	wg.Wait()
	return sent
}

func TestWindowedSameInstant(t *testing.T) {
	const limit = 7
	for _, tt := range windowedLimiters {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			clk.Advance(time.Hour / 3) // not on a window boundary
			l, err := tt.build(limit, time.Minute, throttle.WithClock(clk.Now))
			require.NoError(t, err)
			assert.Equal(t, limit, admitTogether(100, func() bool {
				r, err := l.Reserve(context.Background(), "k", 1, 0)
				return err == nil && r.OK
			}))
			ok, err := throttle.Allow(context.Background(), l, "k", 1)
			require.NoError(t, err)
			assert.False(t, ok)
			ok, err = throttle.Allow(context.Background(), l, "other", limit)
			require.NoError(t, err)
			assert.True(t, ok, "keys are independent")
		})
	}
}

func TestWindowedValidation(t *testing.T) {
	tests := []struct {
		name       string
		giveLimit  int
		giveWindow time.Duration
		giveOpts   []throttle.Option
		wantErr    string
	}{
		{name: "zero limit", giveLimit: 0, giveWindow: time.Second, wantErr: "limit must be at least 1, got 0"},
		{name: "negative limit", giveLimit: -3, giveWindow: time.Second, wantErr: "limit must be at least 1, got -3"},
		{name: "zero window", giveLimit: 1, giveWindow: 0, wantErr: "window must be positive, got 0s"},
		{name: "negative window", giveLimit: 1, giveWindow: -time.Second, wantErr: "window must be positive, got -1s"},
		{name: "window too long", giveLimit: 1, giveWindow: time.Duration(math.MaxInt64/8 + 1), wantErr: "window 320255h58m24.606846976s is too long"},
		{name: "window plus tolerance too long", giveLimit: 1, giveWindow: time.Duration(math.MaxInt64 / 8), giveOpts: []throttle.Option{throttle.WithTolerance(time.Second)}, wantErr: "plus tolerance 1s is too long"},
		{name: "negative tolerance", giveLimit: 1, giveWindow: time.Second, giveOpts: []throttle.Option{throttle.WithTolerance(-1)}, wantErr: "WithTolerance must not be negative, got -1ns"},
	}
	for _, lt := range windowedLimiters {
		for _, tt := range tests {
			t.Run(lt.name+"/"+tt.name, func(t *testing.T) {
				l, err := lt.build(tt.giveLimit, tt.giveWindow, tt.giveOpts...)
				require.Error(t, err)
				assert.Nil(t, l)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "throttle: ")
			})
		}
	}
}

func TestWindowedBadRequests(t *testing.T) {
	tests := []struct {
		name    string
		giveN   int
		wantIs  error
		wantErr string
	}{
		{name: "more than the limit", giveN: 6, wantIs: throttle.ErrExceedsCapacity, wantErr: "n is 6, at most 5 fit"},
		{name: "zero", giveN: 0, wantErr: "n must be positive, got 0"},
		{name: "negative", giveN: -1, wantErr: "n must be positive, got -1"},
	}
	for _, lt := range windowedLimiters {
		for _, tt := range tests {
			t.Run(lt.name+"/"+tt.name, func(t *testing.T) {
				l, err := lt.build(5, time.Second)
				require.NoError(t, err)
				r, err := l.Reserve(context.Background(), "k", tt.giveN, -1)
				require.Error(t, err)
				assert.Nil(t, r)
				assert.Contains(t, err.Error(), tt.wantErr)
				if tt.wantIs != nil {
					assert.ErrorIs(t, err, tt.wantIs)
				}
			})
		}
	}
}

// TestWindowedClockBackwards steps the clock back, including a stale
// reading after a newer one, and checks that no window admits extra and
// no delay is negative.
func TestWindowedClockBackwards(t *testing.T) {
	const limit, window = 3, time.Minute
	for _, lt := range windowedLimiters {
		t.Run(lt.name, func(t *testing.T) {
			clk := newManualClock()
			l, err := lt.build(limit, window, throttle.WithClock(clk.Now))
			require.NoError(t, err)
			clk.Set(epoch().Add(window - time.Second)) // late in the first window
			admitted := 0
			for _, back := range []time.Duration{0, time.Second, 30 * time.Second, window, 0} {
				clk.Set(epoch().Add(window - time.Second - back))
				r, err := l.Reserve(context.Background(), "k", 1, 0)
				require.NoError(t, err)
				assert.GreaterOrEqual(t, r.Delay, time.Duration(0))
				if r.OK {
					admitted++
				}
			}
			assert.Equal(t, limit, admitted, "the clock running back mints nothing")
		})
	}
}

func TestWindowedDropsFreshKeys(t *testing.T) {
	const window = time.Minute
	for _, lt := range windowedLimiters {
		t.Run(lt.name, func(t *testing.T) {
			clk := newManualClock()
			l, err := lt.build(2, window, throttle.WithClock(clk.Now), throttle.WithMaxKeys(1))
			require.NoError(t, err)
			ctx := context.Background()
			ok, err := throttle.Allow(ctx, l, "a", 2)
			require.NoError(t, err)
			require.True(t, ok)

			_, err = l.Reserve(ctx, "b", 1, -1)
			require.ErrorIs(t, err, throttle.ErrTooManyKeys, "a's units still count")

			clk.Advance(2 * window)
			ok, err = throttle.Allow(ctx, l, "b", 2)
			require.NoError(t, err)
			assert.True(t, ok, "a was dropped at no cost")
			ok, err = throttle.Allow(ctx, l, "a", 2)
			require.ErrorIs(t, err, throttle.ErrTooManyKeys)
			assert.False(t, ok)
		})
	}
}

// TestWindowedPause checks that a sleeper whose slot falls inside a pause
// sends after it, and that a second, shorter pause changes nothing.
func TestWindowedPause(t *testing.T) {
	const limit, window = 2, time.Second
	for _, lt := range windowedLimiters {
		t.Run(lt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(time.Until(time.Now().Truncate(window).Add(window))) // on a boundary
				start := time.Now()
				l, err := lt.build(limit, window)
				require.NoError(t, err)
				ctx := context.Background()
				ok, err := throttle.Allow(ctx, l, "k", limit)
				require.NoError(t, err)
				require.True(t, ok)
				r, err := l.Reserve(ctx, "k", 1, -1)
				require.NoError(t, err)
				require.True(t, r.OK)
				require.Positive(t, r.Delay)
				slot := r.Delay

				woke := make(chan time.Duration, 1)
				go func() {
					assert.NoError(t, r.Wait(ctx))
					woke <- time.Since(start)
				}()
				time.Sleep(slot - window/10)
				pauser := l.(throttle.Pauser)
				require.NoError(t, pauser.Pause(ctx, "k", window/2))
				require.NoError(t, pauser.Pause(ctx, "k", window/4))
				synctest.Wait()
				until := time.Since(start) + window/2
				assert.GreaterOrEqual(t, <-woke, until, "the sleeper goes after the pause")

				next, err := l.Reserve(ctx, "k", 1, -1)
				require.NoError(t, err)
				require.True(t, next.OK)
				assert.GreaterOrEqual(t, time.Since(start)+next.Delay, until, "new bookings go after the pause")
			})
		})
	}
}

func TestSlidingWindowReserve(t *testing.T) {
	clk := newManualClock()
	w := newSlidingWindow(t, 5, 10*time.Second, throttle.WithClock(clk.Now))
	type want = reserveWant
	steps := []reserveStep{
		{giveN: 2, giveMaxWait: 0, want: want{ok: true, slot: 0, remaining: 3}},
		{giveAdvance: 3 * time.Second, giveN: 2, giveMaxWait: 0, want: want{ok: true, slot: 3 * time.Second, remaining: 1}},
		{giveAdvance: 1 * time.Second, giveN: 2, giveMaxWait: 0, want: want{ok: false, slot: 4*time.Second + 6*time.Second, remaining: 1}},
		{giveN: 2, giveMaxWait: -1, want: want{ok: true, slot: 10 * time.Second, remaining: 1}},
		{giveN: 3, giveMaxWait: -1, want: want{ok: true, slot: 13 * time.Second, remaining: 0}},
		{giveAdvance: 10 * time.Second, giveN: 1, giveMaxWait: -1, want: want{ok: true, slot: 20 * time.Second, remaining: 1}},
		{giveAdvance: 10 * time.Second, giveN: 5, giveMaxWait: 0, want: want{ok: false, slot: 30 * time.Second, remaining: 4}},
		{giveAdvance: 6 * time.Second, giveN: 5, giveMaxWait: 0, want: want{ok: true, slot: 30 * time.Second, remaining: 0}},
	}
	runReserveSteps(t, w, clk, steps)
	assert.Equal(t, 5, w.Limit())
	assert.Equal(t, 10*time.Second, w.Window())
}

func TestSlidingWindowCancel(t *testing.T) {
	ctx := context.Background()
	t.Run("latest gives back everything", func(t *testing.T) {
		clk := newManualClock()
		w := newSlidingWindow(t, 3, time.Second, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, w, clk, 3, 0)
		r, slot := reserveAt(t, w, clk, 2, -1)
		require.True(t, r.OK)
		require.NoError(t, r.Cancel(ctx))
		again, againSlot := reserveAt(t, w, clk, 3, -1)
		require.True(t, again.OK)
		assert.Equal(t, slot, againSlot, "the 3 units fit where the cancelled 2 were")
		assert.Equal(t, 0, again.Remaining)
	})
	t.Run("earlier gives back within the limit", func(t *testing.T) {
		clk := newManualClock()
		w := newSlidingWindow(t, 3, time.Second, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, w, clk, 3, 0)
		clk.Advance(100 * time.Millisecond)
		first, firstSlot := reserveAt(t, w, clk, 2, -1) // at 1s
		_, lastSlot := reserveAt(t, w, clk, 1, -1)      // at 1s
		require.Equal(t, time.Second, firstSlot)
		require.Equal(t, time.Second, lastSlot)
		require.NoError(t, first.Cancel(ctx))
		require.NoError(t, first.Cancel(ctx))
		r, slot := reserveAt(t, w, clk, 2, -1)
		assert.True(t, r.OK)
		assert.Equal(t, time.Second, slot, "2 units came back at 1s, and no slot moves back")
		r, slot = reserveAt(t, w, clk, 1, -1)
		assert.True(t, r.OK)
		assert.Equal(t, 2*time.Second, slot, "cancelling twice gives back nothing more")
	})
	t.Run("after the log dropped old units", func(t *testing.T) {
		clk := newManualClock()
		w := newSlidingWindow(t, 2, time.Second, throttle.WithClock(clk.Now))
		var rs []*throttle.Reservation
		for range 6 { // slots 0, 0, 1s, 1s, 2s, 2s: the log keeps the last two
			r, _ := reserveAt(t, w, clk, 1, -1)
			rs = append(rs, r)
		}
		require.NoError(t, rs[4].Cancel(ctx))
		require.NoError(t, rs[5].Cancel(ctx))
		_, slot := reserveAt(t, w, clk, 1, -1)
		assert.Equal(t, 2*time.Second, slot, "the dropped units at 1s still count")
	})
}

func TestSlidingWindowTolerance(t *testing.T) {
	clk := newManualClock()
	w := newSlidingWindow(t, 2, time.Second, throttle.WithClock(clk.Now), throttle.WithTolerance(throttle.DefaultTolerance))
	_, _ = reserveAt(t, w, clk, 2, 0)
	r, slot := reserveAt(t, w, clk, 1, -1)
	require.True(t, r.OK)
	assert.Equal(t, time.Second+throttle.DefaultTolerance, slot)
}

func TestSlidingWindowKeepsItsMemoryBounded(t *testing.T) {
	clk := newManualClock()
	w := newSlidingWindow(t, 4, time.Second, throttle.WithClock(clk.Now))
	// Far more future bookings than the limit: only the last 4 units are
	// needed to place the next one, and the log stays exact. Calls of 1
	// and 2 units alternate, so each second after the first holds 3 units:
	// a pair never fits in the one unit left.
	sent := sends{}
	var last time.Duration
	for i := range 1000 {
		r, slot := reserveAt(t, w, clk, 1+i%2, -1)
		require.True(t, r.OK)
		require.GreaterOrEqual(t, slot, last)
		last = slot
		sent[slot] += 1 + i%2
	}
	assert.Equal(t, 499*time.Second, last)
	assert.Equal(t, 4, sent.most(time.Second))
}

func TestWindowedAllowIsLimited(t *testing.T) {
	for _, lt := range windowedLimiters {
		t.Run(lt.name, func(t *testing.T) {
			clk := newManualClock()
			l, err := lt.build(3, time.Second, throttle.WithClock(clk.Now))
			require.NoError(t, err)
			got := 0
			for range 10 {
				ok, err := throttle.Allow(context.Background(), l, "k", 1)
				require.NoError(t, err)
				if ok {
					got++
				}
			}
			assert.Equal(t, 3, got)
			_, err = throttle.Allow(context.Background(), l, "k", 4)
			assert.True(t, errors.Is(err, throttle.ErrExceedsCapacity))
		})
	}
}

// TestWindowedLargeLimits checks that daily limits far above limit×window
// in int64 nanoseconds are accepted and counted exactly: the whole limit
// fits in one day, and one unit more is refused until the next.
func TestWindowedLargeLimits(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name      string
		giveLimit int
	}{
		{name: "100 000 a day", giveLimit: 100_000},
		{name: "a million a day", giveLimit: 1_000_000},
		{name: "a billion a day", giveLimit: 1_000_000_000},
	}
	for _, lt := range windowedLimiters {
		for _, tt := range tests {
			t.Run(lt.name+"/"+tt.name, func(t *testing.T) {
				clk := newManualClock()
				l, err := lt.build(tt.giveLimit, day, throttle.WithClock(clk.Now))
				require.NoError(t, err)
				ctx := context.Background()
				r, err := l.Reserve(ctx, "k", tt.giveLimit, 0)
				require.NoError(t, err)
				assert.True(t, r.OK, "the whole limit at once")
				clk.Advance(day / 2)
				r, err = l.Reserve(ctx, "k", 1, 0)
				require.NoError(t, err)
				assert.False(t, r.OK, "one more unit the same day")
				assert.Positive(t, r.Delay)
				assert.LessOrEqual(t, r.Delay, day)
			})
		}
	}
}
