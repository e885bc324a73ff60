package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func newFixedWindow(t *testing.T, limit int, window time.Duration, opts ...throttle.Option) *throttle.FixedWindow {
	t.Helper()
	f, err := throttle.NewFixedWindow(limit, window, opts...)
	require.NoError(t, err)
	return f
}

func TestFixedWindowSaturatedRun(t *testing.T) {
	const limit = 50
	for _, window := range []time.Duration{time.Second, 7 * time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			clk := newManualClock()
			f := newFixedWindow(t, limit, window, throttle.WithClock(clk.Now))

			// Enough windows that a partial first one does not skew the rate.
			slots := saturatedRun(t, f, clk, 2*limit, 150_000, 3*time.Millisecond)

			sent := sends{}
			for _, s := range slots {
				sent[s]++
			}
			assert.Equal(t, limit, sent.aligned(window, epoch()), "units in one aligned window")
			assert.LessOrEqual(t, maxInWindow(slots, window-1), 2*limit, "units in any window")
			assertLongRunRate(t, throttle.Rate{N: limit, Per: window}, slots)
		})
	}
}

func TestFixedWindowUnderPressureKeepsTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, window = 10, time.Second
		start := time.Now() // synctest's clock starts on a whole second
		f := newFixedWindow(t, limit, window)
		sent := underPressure(t, f, window)
		assert.LessOrEqual(t, sent.aligned(window, start), limit)
	})
}

func TestFixedWindowReserve(t *testing.T) {
	clk := newManualClock()
	clk.Advance(90 * time.Second) // halfway through a minute
	f := newFixedWindow(t, 5, time.Minute, throttle.WithClock(clk.Now))
	type want = reserveWant
	steps := []reserveStep{
		{giveN: 3, giveMaxWait: 0, want: want{ok: true, slot: 90 * time.Second, remaining: 2}},
		{giveN: 3, giveMaxWait: 0, want: want{ok: false, slot: 2 * time.Minute, remaining: 2}},
		// Refused, but with 29s to spare the same call succeeds in 1s.
		{giveN: 3, giveMaxWait: 29 * time.Second, want: want{ok: false, slot: 91 * time.Second, remaining: 2}},
		{giveN: 3, giveMaxWait: 30 * time.Second, want: want{ok: true, slot: 2 * time.Minute, remaining: 2}},
		{giveN: 5, giveMaxWait: -1, want: want{ok: true, slot: 3 * time.Minute, remaining: 0}},
		{giveN: 2, giveMaxWait: -1, want: want{ok: true, slot: 4 * time.Minute, remaining: 3}},
		{giveAdvance: 2 * time.Minute, giveN: 1, giveMaxWait: 0, want: want{ok: false, slot: 4 * time.Minute, remaining: 0}},
		{giveN: 1, giveMaxWait: -1, want: want{ok: true, slot: 4 * time.Minute, remaining: 2}},
	}
	runReserveSteps(t, f, clk, steps)
	assert.Equal(t, 5, f.Limit())
	assert.Equal(t, time.Minute, f.Window())
}

func TestFixedWindowOffset(t *testing.T) {
	tests := []struct {
		name       string
		giveOffset time.Duration
		giveAt     time.Time
		wantReset  time.Time
	}{
		{
			name:      "UTC midnight",
			giveAt:    time.Date(2026, 3, 2, 7, 59, 0, 0, time.UTC),
			wantReset: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC),
		},
		{
			name:       "Pacific midnight, before the reset",
			giveOffset: 8 * time.Hour,
			giveAt:     time.Date(2026, 3, 2, 7, 59, 0, 0, time.UTC),
			wantReset:  time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC),
		},
		{
			name:       "Pacific midnight, after the reset",
			giveOffset: 8 * time.Hour,
			giveAt:     time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC),
			wantReset:  time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC),
		},
		{
			name:       "negative offset",
			giveOffset: -2 * time.Hour,
			giveAt:     time.Date(2026, 3, 2, 21, 0, 0, 0, time.UTC),
			wantReset:  time.Date(2026, 3, 2, 22, 0, 0, 0, time.UTC),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			clk.Set(tt.giveAt)
			f := newFixedWindow(t, 2, 24*time.Hour, throttle.WithClock(clk.Now), throttle.WithWindowOffset(tt.giveOffset))
			r, err := f.Reserve(context.Background(), "k", 2, 0)
			require.NoError(t, err)
			require.True(t, r.OK)
			r, err = f.Reserve(context.Background(), "k", 1, -1)
			require.NoError(t, err)
			require.True(t, r.OK)
			assert.Equal(t, tt.wantReset, tt.giveAt.Add(r.Delay))
		})
	}
}

func TestFixedWindowCancel(t *testing.T) {
	ctx := context.Background()
	t.Run("latest gives back everything", func(t *testing.T) {
		clk := newManualClock()
		f := newFixedWindow(t, 3, time.Minute, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, f, clk, 3, 0)
		r, slot := reserveAt(t, f, clk, 2, -1)
		require.Equal(t, time.Minute, slot)
		require.Equal(t, 1, r.Remaining)
		require.NoError(t, r.Cancel(ctx))
		require.NoError(t, r.Cancel(ctx))
		again, slot := reserveAt(t, f, clk, 3, -1)
		assert.Equal(t, time.Minute, slot)
		assert.Equal(t, 0, again.Remaining, "cancelling twice gave back no more")
	})
	t.Run("an earlier window gives back nothing", func(t *testing.T) {
		clk := newManualClock()
		f := newFixedWindow(t, 3, time.Minute, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, f, clk, 3, 0)
		first, slot := reserveAt(t, f, clk, 3, -1)
		require.Equal(t, time.Minute, slot)
		_, slot = reserveAt(t, f, clk, 1, -1)
		require.Equal(t, 2*time.Minute, slot)
		require.NoError(t, first.Cancel(ctx))
		_, slot = reserveAt(t, f, clk, 2, -1)
		assert.Equal(t, 2*time.Minute, slot, "the cursor's window still has room")
		_, slot = reserveAt(t, f, clk, 1, -1)
		assert.Equal(t, 3*time.Minute, slot, "no slot goes back to window 1")
	})
	t.Run("the cursor's window gives back when not latest", func(t *testing.T) {
		clk := newManualClock()
		f := newFixedWindow(t, 3, time.Minute, throttle.WithClock(clk.Now))
		_, _ = reserveAt(t, f, clk, 3, 0)
		first, _ := reserveAt(t, f, clk, 2, -1)
		_, _ = reserveAt(t, f, clk, 1, -1)
		require.NoError(t, first.Cancel(ctx))
		r, slot := reserveAt(t, f, clk, 2, -1)
		assert.Equal(t, time.Minute, slot)
		assert.Equal(t, 0, r.Remaining)
	})
}

func TestFixedWindowTolerance(t *testing.T) {
	tests := []struct {
		name       string
		giveOpts   []throttle.Option
		wantAfter2 bool
	}{
		{name: "literal", wantAfter2: true},
		{name: "tolerant", giveOpts: []throttle.Option{throttle.WithTolerance(throttle.DefaultTolerance)}, wantAfter2: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			clk.Set(epoch().Add(time.Minute - time.Millisecond)) // just before a reset
			f := newFixedWindow(t, 3, time.Minute, append(tt.giveOpts, throttle.WithClock(clk.Now))...)
			ok, err := throttle.Allow(context.Background(), f, "k", 2)
			require.NoError(t, err)
			require.True(t, ok)

			clk.Advance(time.Millisecond) // the next window
			ok, err = throttle.Allow(context.Background(), f, "k", 2)
			require.NoError(t, err)
			assert.Equal(t, tt.wantAfter2, ok, "units sent just before the reset may arrive after it")
		})
	}

	_, err := throttle.NewFixedWindow(3, time.Second, throttle.WithTolerance(time.Second))
	assert.ErrorContains(t, err, "throttle: WithTolerance must be shorter than the window (1s), got 1s")
}

// TestAllFixedWindowAndTokenBucket books a daily quota and a per-second
// rate together: each unit goes at one slot that suits both, and the
// day's turn releases units at the rate, not as a herd.
func TestAllFixedWindowAndTokenBucket(t *testing.T) {
	clk := newManualClock()
	clk.Set(epoch().Add(24*time.Hour - 2*time.Second))
	day := newFixedWindow(t, 3, 24*time.Hour, throttle.WithClock(clk.Now))
	second := newTokenBucket(t, throttle.PerSecond(1), 1, throttle.WithClock(clk.Now))
	l := throttle.All(day, second)

	var delays []time.Duration
	for range 6 {
		r, err := l.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		delays = append(delays, r.Delay)
	}
	assert.Equal(t, []time.Duration{
		0, time.Second, // the day's last two seconds
		2 * time.Second, 3 * time.Second, 4 * time.Second, // the next day, one a second
		// Its quota is spent: the day after, at its reset.
		24*time.Hour + 2*time.Second,
	}, delays)

	r, err := l.Reserve(context.Background(), "k", 1, 0)
	require.NoError(t, err)
	assert.False(t, r.OK)
	r, err = second.Reserve(context.Background(), "other", 1, 0)
	require.NoError(t, err)
	assert.True(t, r.OK, "a refused All leaves its parts untouched")
}

// TestFixedWindowResetsOnTime is issue 11's first defect: when the day's
// quota runs out while units are still booked ahead, the next day's
// first unit goes at midnight, not a day late.
func TestFixedWindowResetsOnTime(t *testing.T) {
	tests := []struct {
		name       string
		giveBefore time.Duration // how long before midnight the clock starts
		givePause  time.Duration // paused at the start, before any booking
		giveAll    bool          // with a token bucket of 2/s, burst 1
		giveLimit  int
		giveCalls  int
		wantDelays []time.Duration
	}{
		{
			name: "All with a token bucket", giveBefore: 2 * time.Second, giveAll: true, giveLimit: 2, giveCalls: 4,
			wantDelays: []time.Duration{0, 500 * time.Millisecond, 2 * time.Second, 2500 * time.Millisecond},
		},
		{
			name: "after a pause", giveBefore: 10 * time.Second, givePause: 5 * time.Second, giveLimit: 3, giveCalls: 4,
			wantDelays: []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second, 10 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			clk.Set(epoch().Add(24*time.Hour - tt.giveBefore))
			day := newFixedWindow(t, tt.giveLimit, 24*time.Hour, throttle.WithClock(clk.Now))
			var l throttle.Limiter = day
			if tt.giveAll {
				l = throttle.All(day, newTokenBucket(t, throttle.PerSecond(2), 1, throttle.WithClock(clk.Now)))
			}
			if tt.givePause > 0 {
				require.NoError(t, l.(throttle.Pauser).Pause(context.Background(), "k", tt.givePause))
			}
			var delays []time.Duration
			for range tt.giveCalls {
				r, err := l.Reserve(context.Background(), "k", 1, 10*time.Second)
				require.NoError(t, err)
				require.True(t, r.OK, "refused with Delay %v", r.Delay)
				delays = append(delays, r.Delay)
			}
			assert.Equal(t, tt.wantDelays, delays)
		})
	}
}

// TestFixedWindowPauseAcrossTheReset pauses a daily quota of 2 while it
// holds units ahead on both sides of midnight: the one carried across
// midnight counts there, so the new day's last-booked unit moves to the
// day after, and no day holds more than 2.
func TestFixedWindowPauseAcrossTheReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // synctest's clock starts at midnight UTC
		time.Sleep(24*time.Hour - 2*time.Second)
		day, err := throttle.NewFixedWindow(2, 24*time.Hour)
		require.NoError(t, err)
		bucket, err := throttle.NewTokenBucket(throttle.PerSecond(2), 1)
		require.NoError(t, err)
		l := throttle.All(day, bucket)

		woke := wakeAll(t, l, 4, start)
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, l.(throttle.Pauser).Pause(context.Background(), "k", 1950*time.Millisecond))
		got := woke()

		midnight := 24 * time.Hour
		assert.Equal(t, []time.Duration{
			midnight - 2*time.Second,        // due before the pause
			midnight + 450*time.Millisecond, // 23:59:58.5 moved by 1.95s
			midnight + 1950*time.Millisecond,
			2 * midnight, // the new day is full: the next one's reset
		}, got)
	})
}

// TestFixedWindowModel books, cancels and pauses at random, on a fixed
// window alone and together with a token bucket, and checks by the time
// each unit's Wait returned that no aligned window ever held more than
// the limit.
func TestFixedWindowModel(t *testing.T) {
	const limit, window = 4, time.Second
	tests := []struct {
		name     string
		giveSeed uint64
		giveAll  bool
		giveTol  time.Duration
	}{
		{name: "alone", giveSeed: 1},
		{name: "alone, other seed", giveSeed: 2},
		{name: "with a token bucket", giveSeed: 3, giveAll: true},
		{name: "with a token bucket, other seed", giveSeed: 4, giveAll: true},
		{name: "tolerance", giveSeed: 5, giveTol: 100 * time.Millisecond},
	}
	if n, _ := strconv.Atoi(os.Getenv("FW_MODEL_SEEDS")); n > 0 { // a longer run, by hand
		base := tests
		tests = nil
		for seed := range uint64(n) {
			for _, tt := range base {
				tt.giveSeed = seed
				tt.name = fmt.Sprintf("%s/%d", tt.name, seed)
				tests = append(tests, tt)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				f, err := throttle.NewFixedWindow(limit, window, throttle.WithTolerance(tt.giveTol))
				require.NoError(t, err)
				var l throttle.Limiter = f
				if tt.giveAll {
					b, err := throttle.NewTokenBucket(throttle.PerSecond(7), 2)
					require.NoError(t, err)
					l = throttle.All(f, b)
				}
				rng := rand.New(rand.NewPCG(tt.giveSeed, 11))
				var (
					mu   sync.Mutex
					sent = sends{}
					wg   sync.WaitGroup
				)
				for range 600 {
					switch x := rng.IntN(10); {
					case x < 6:
						maxWait := time.Duration(-1)
						if rng.IntN(3) == 0 {
							maxWait = time.Duration(rng.Int64N(int64(2 * window)))
						}
						n := 1 + rng.IntN(2)
						r, err := l.Reserve(context.Background(), "k", n, maxWait)
						require.NoError(t, err)
						if !r.OK {
							continue
						}
						cancelAfter := time.Duration(-1)
						if rng.IntN(5) == 0 {
							cancelAfter = time.Duration(rng.Int64N(int64(r.Delay) + 1))
						}
						wg.Go(func() {
							if cancelAfter >= 0 {
								time.Sleep(cancelAfter)
								assert.NoError(t, r.Cancel(context.Background()))
								return
							}
							assert.NoError(t, r.Wait(context.Background()))
							mu.Lock()
							sent[time.Since(start)] += n
							mu.Unlock()
						})
					case x < 8:
						d := time.Duration(rng.Int64N(int64(3 * window / 2)))
						require.NoError(t, l.(throttle.Pauser).Pause(context.Background(), "k", d))
					default:
						time.Sleep(time.Duration(rng.Int64N(int64(window / 2))))
					}
				}
				wg.Wait()
				assert.Greater(t, sent.total(), 100)
				assert.LessOrEqual(t, sent.aligned(window, start), limit)
				if tt.giveAll {
					assert.NoError(t, sent.conform(time.Second/7+1, 2), "the bucket's bound holds for the units as sent")
				}
				if tt.giveTol > 0 {
					// A unit sent in the last tolerance of a window counts in
					// the next one too.
					assert.LessOrEqual(t, sent.alignedWithTail(window, tt.giveTol, start), limit)
				}
			})
		})
	}
}

// alignedWithTail is aligned, counting a unit sent in the last tail of
// a window in the next one too.
func (s sends) alignedWithTail(window, tail time.Duration, origin time.Time) int {
	phase := time.Duration(origin.UnixNano()) % window
	per := map[time.Duration]int{}
	most := 0
	for t, n := range s {
		for _, at := range []time.Duration{t, t + tail} {
			i := (at + phase) / window
			if at != t && i == (t+phase)/window {
				continue
			}
			per[i] += n
			most = max(most, per[i])
		}
	}
	return most
}

// TestFixedWindowIssueTwo is issue 11's second case, in process: a 4s
// window of 2, its boundary B 1s away, a pause of 500ms, two units at
// B-0.5s and two at B, then a pause of 1.2s.
func TestFixedWindowIssueTwo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 4 * time.Second
		start := time.Now() // on a whole window: B is start+4s
		time.Sleep(3 * time.Second)
		f, err := throttle.NewFixedWindow(2, window)
		require.NoError(t, err)
		require.NoError(t, f.Pause(context.Background(), "k", 500*time.Millisecond))
		woke := wakeAll(t, f, 4, start)
		require.NoError(t, f.Pause(context.Background(), "k", 1200*time.Millisecond))
		got := woke()
		b := window
		assert.Equal(t, []time.Duration{b + 200*time.Millisecond, b + 200*time.Millisecond, 2 * b, 2 * b}, got)
	})
}

// wakeAll reserves n single units of key "k" of l, each waited for by a
// goroutine, inside a synctest bubble. The returned func waits for them
// all and returns when each woke, as offsets from start, sorted.
func wakeAll(t *testing.T, l throttle.Limiter, n int, start time.Time) func() []time.Duration {
	var (
		mu  sync.Mutex
		got []time.Duration
		wg  sync.WaitGroup
	)
	for range n {
		r, err := l.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		wg.Go(func() {
			assert.NoError(t, r.Wait(context.Background()))
			mu.Lock()
			got = append(got, time.Since(start))
			mu.Unlock()
		})
	}
	return func() []time.Duration {
		wg.Wait()
		slices.Sort(got)
		return got
	}
}

// TestAllSpacesUnitsAfterAPush pauses All(bucket 10/s burst 1, window
// 2/s) so that the window pushes a unit into the next second: the next
// booking goes an interval after it, not at the same instant.
func TestAllSpacesUnitsAfterAPush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		time.Sleep(800 * time.Millisecond)
		fw, err := throttle.NewFixedWindow(2, time.Second)
		require.NoError(t, err)
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 1)
		require.NoError(t, err)
		l := throttle.All(fw, tb)
		woke := wakeAll(t, l, 4, start) // at 0.8 and 0.9, then 1.0 and 1.1
		time.Sleep(50 * time.Millisecond)
		// 0.9 moves to 1.05 and fills the second with 1.0 (now 1.15);
		// 1.1 (now 1.25) no longer fits: it goes at 2.0.
		require.NoError(t, l.(throttle.Pauser).Pause(context.Background(), "k", 150*time.Millisecond))
		r, err := l.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		require.True(t, r.OK)
		assert.Equal(t, 2100*time.Millisecond, time.Since(start)+r.Delay, "an interval after the pushed unit")
		assert.Equal(t, []time.Duration{800 * time.Millisecond, 1050 * time.Millisecond, 1150 * time.Millisecond, 2 * time.Second}, woke())
	})
}

// conform checks the units sent against a token bucket with the given
// interval and burst, by virtual scheduling over the sorted sends.
func (s sends) conform(interval time.Duration, burst int) error {
	at := make([]time.Duration, 0, len(s))
	for t := range s {
		at = append(at, t)
	}
	slices.Sort(at)
	tat := time.Duration(-1 << 62)
	for _, t := range at {
		for range s[t] {
			tat = max(tat, t) + interval
			if tat-t > time.Duration(burst)*interval {
				return fmt.Errorf("unit sent at %v: %v of units ahead exceed a burst of %d", t, tat-t, burst)
			}
		}
	}
	return nil
}
