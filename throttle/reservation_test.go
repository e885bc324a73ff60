package throttle_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// reserve books n units of key "k" on l, failing the test on an error or
// a refusal, and returns the reservation.
func reserve(t *testing.T, l throttle.Limiter, n int, maxWait time.Duration) *throttle.Reservation {
	t.Helper()
	r, err := l.Reserve(context.Background(), "k", n, maxWait)
	require.NoError(t, err)
	require.True(t, r.OK, "reservation refused, retry after %v", r.Delay)
	return r
}

func TestCancelLatestGivesEverythingBack(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 2, throttle.WithClock(clk.Now))
	ctx := context.Background()

	now := reserve(t, tb, 2, 0)
	require.NoError(t, now.Cancel(ctx))
	assert.Equal(t, time.Duration(0), reserve(t, tb, 2, 0).Delay, "cancelled before its slot passed: the units can be had now")

	r1 := reserve(t, tb, 1, -1)
	r2 := reserve(t, tb, 1, -1)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, []time.Duration{r1.Delay, r2.Delay})
	require.NoError(t, r2.Cancel(ctx))
	require.NoError(t, r1.Cancel(ctx))

	again := reserve(t, tb, 1, -1)
	assert.Equal(t, 100*time.Millisecond, again.Delay, "both came back, latest first")
	assert.Equal(t, 0, again.Remaining)
}

func TestCancelEarlierBookingKeepsTheBound(t *testing.T) {
	clk := newManualClock()
	interval := 100 * time.Millisecond
	tb := newTokenBucket(t, throttle.PerSecond(10), 2, throttle.WithClock(clk.Now))
	ctx := context.Background()

	slots := []time.Duration{0, 0}
	reserve(t, tb, 2, 0)
	r1 := reserve(t, tb, 2, -1)
	r2 := reserve(t, tb, 1, -1)
	slots = append(slots, r2.Delay)
	require.NoError(t, r1.Cancel(ctx), "r2 was booked after it")
	for range 10 {
		slots = append(slots, reserve(t, tb, 1, -1).Delay)
	}
	for _, span := range []time.Duration{0, interval, 3 * interval, time.Second} {
		assert.LessOrEqual(t, maxInWindow(slots, span), 2+int(span/interval), "units in any %v", span)
	}
}

func TestCancelIsIdempotent(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 1, throttle.WithClock(clk.Now))
	ctx := context.Background()

	reserve(t, tb, 1, 0)
	reserve(t, tb, 1, -1) // 100ms
	r := reserve(t, tb, 1, -1)
	require.Equal(t, 200*time.Millisecond, r.Delay)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { assert.NoError(t, r.Cancel(ctx)) })
	}
	wg.Wait()
	assert.Equal(t, 200*time.Millisecond, reserve(t, tb, 1, -1).Delay, "given back once, not ten times")
}

func TestCancelAfterTheSlotDoesNothing(t *testing.T) {
	clk := newManualClock()
	newTB := func() *throttle.TokenBucket {
		return newTokenBucket(t, throttle.PerSecond(10), 1, throttle.WithClock(clk.Now))
	}
	cancelled, untouched := newTB(), newTB()
	ctx := context.Background()

	reserve(t, cancelled, 1, 0)
	reserve(t, untouched, 1, 0)
	r := reserve(t, cancelled, 1, -1)
	reserve(t, untouched, 1, -1)
	clk.Advance(r.Delay + time.Nanosecond)
	require.NoError(t, r.Cancel(ctx))

	assert.Equal(t, reserve(t, untouched, 1, -1).Delay, reserve(t, cancelled, 1, -1).Delay)
}

func TestCancelAfterWaitDoesNothing(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 1, throttle.WithClock(clk.Now))
	ctx := context.Background()

	r := reserve(t, tb, 1, 0)
	require.NoError(t, r.Wait(ctx))
	require.NoError(t, r.Cancel(ctx))
	assert.Equal(t, 100*time.Millisecond, reserve(t, tb, 1, -1).Delay, "the units were used at their slot")
}

func TestRefusedReservation(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		give *throttle.Reservation
	}{
		{name: "zero value", give: &throttle.Reservation{}},
		{name: "Refused", give: throttle.Refused(time.Second, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.False(t, tt.give.OK)
			assert.NoError(t, tt.give.Cancel(ctx))
			err := tt.give.Wait(ctx)
			assert.ErrorIs(t, err, throttle.ErrLimitExceeded)
			var le *throttle.LimitError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.give.Delay, le.RetryAfter)
		})
	}
	assert.Equal(t, time.Duration(0), throttle.Refused(-time.Second, 0).Delay, "never a negative delay")
}

func TestWaitFailsFastPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newTokenBucket(t, throttle.PerSecond(1), 1)
		reserve(t, tb, 1, 0)
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()

		start := time.Now()
		err := throttle.Wait(ctx, tb, "k", 1)
		assert.Equal(t, time.Duration(0), time.Since(start), "no sleeping just to fail")
		assertDeadlineError(t, err)
		assert.Equal(t, time.Second, reserve(t, tb, 1, -1).Delay, "nothing was taken")
	})
}

func TestReservationWaitFailsFastPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newTokenBucket(t, throttle.PerSecond(1), 1)
		reserve(t, tb, 1, 0)
		r := reserve(t, tb, 1, -1)
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()

		start := time.Now()
		err := r.Wait(ctx)
		assert.Equal(t, time.Duration(0), time.Since(start), "no sleeping just to fail")
		assertDeadlineError(t, err)
		assert.Equal(t, time.Second, reserve(t, tb, 1, -1).Delay, "the reservation was cancelled")
	})
}

func assertDeadlineError(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, throttle.ErrLimitExceeded)
	var le *throttle.LimitError
	require.ErrorAs(t, err, &le)
	assert.Positive(t, le.RetryAfter)
	assert.True(t, le.Timeout())
	assert.Equal(t, "k", le.Key)
	assert.Contains(t, err.Error(), `"k"`)
}

func TestWaitCancelledWhileAsleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newTokenBucket(t, throttle.PerSecond(1), 1)
		reserve(t, tb, 1, 0)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(300*time.Millisecond, cancel)

		err := throttle.Wait(ctx, tb, "k", 1)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 700*time.Millisecond, reserve(t, tb, 1, -1).Delay, "the latest booking came back whole")
	})
}

func TestWaitSleepsToTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newTokenBucket(t, throttle.PerSecond(4), 2)
		start := time.Now()
		var woke []time.Duration
		for range 5 {
			require.NoError(t, throttle.Wait(t.Context(), tb, "k", 1))
			woke = append(woke, time.Since(start))
		}
		assert.Equal(t, []time.Duration{0, 0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond}, woke)
	})
}

func TestPauseMovesSleepers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := newTokenBucket(t, throttle.PerSecond(1), 1)
		start := time.Now()
		reserve(t, tb, 1, 0)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			woke []time.Duration
		)
		for range 2 {
			r := reserve(t, tb, 1, -1) // slots at 1s and 2s
			wg.Go(func() {
				assert.NoError(t, r.Wait(t.Context()))
				mu.Lock()
				defer mu.Unlock()
				woke = append(woke, time.Since(start))
			})
		}
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, tb.Pause(t.Context(), "k", 5*time.Second)) // until 5.5s
		wg.Wait()

		assert.Equal(t, []time.Duration{6 * time.Second, 7 * time.Second}, woke, "shifted by the pause, order and spacing kept")
		require.NoError(t, throttle.Wait(t.Context(), tb, "k", 1))
		assert.Equal(t, 8*time.Second, time.Since(start), "new bookings go after them")
	})
}

func TestPauseDoesNotCompound(t *testing.T) {
	tests := []struct {
		name      string
		givePause []time.Duration
		wantDelay time.Duration
	}{
		{name: "one", givePause: []time.Duration{10 * time.Second}, wantDelay: 10 * time.Second},
		{name: "same twice", givePause: []time.Duration{10 * time.Second, 10 * time.Second}, wantDelay: 10 * time.Second},
		{name: "shorter after longer", givePause: []time.Duration{10 * time.Second, 3 * time.Second}, wantDelay: 10 * time.Second},
		{name: "longer after shorter", givePause: []time.Duration{3 * time.Second, 10 * time.Second}, wantDelay: 10 * time.Second},
		{name: "zero", givePause: []time.Duration{0}, wantDelay: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			tb := newTokenBucket(t, throttle.PerSecond(10), 3, throttle.WithClock(clk.Now))
			for _, d := range tt.givePause {
				require.NoError(t, tb.Pause(context.Background(), "k", d))
			}
			assert.Equal(t, tt.wantDelay, reserve(t, tb, 1, -1).Delay)
		})
	}
}

func TestPauseRejectsNegative(t *testing.T) {
	tb := newTokenBucket(t, throttle.PerSecond(10), 3)
	err := tb.Pause(context.Background(), "k", -time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-1s")
}

func TestAfterPauseAtMostBurstPlusRate(t *testing.T) {
	const burst = 5
	interval := 100 * time.Millisecond
	tests := []struct {
		name       string
		giveBefore int // units taken before the pause
	}{
		{name: "full bucket", giveBefore: 0},
		{name: "half spent", giveBefore: 3},
		{name: "long line", giveBefore: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			tb := newTokenBucket(t, throttle.PerSecond(10), burst, throttle.WithClock(clk.Now))
			var slots []time.Duration
			for range tt.giveBefore {
				d := reserve(t, tb, 1, -1).Delay
				if d > 0 {
					d += 3 * time.Second // still in the future: the pause moves it
				}
				slots = append(slots, d)
			}
			require.NoError(t, tb.Pause(context.Background(), "k", 3*time.Second))
			clk.Advance(time.Second)
			for range 50 {
				slots = append(slots, time.Second+reserve(t, tb, 1, -1).Delay)
			}

			var after []time.Duration
			for _, s := range slots {
				if s > 0 {
					after = append(after, s)
				}
			}
			assert.GreaterOrEqual(t, slices.Min(after), 3*time.Second, "nothing is due inside the pause")
			for _, span := range []time.Duration{0, interval, 5 * interval, 2 * time.Second} {
				assert.LessOrEqual(t, maxInWindow(after, span), burst+int(span/interval), "units in any %v after the pause", span)
			}
		})
	}
}

func TestLeakyBucketPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lb := newLeakyBucket(t, throttle.PerSecond(10), 0)
		start := time.Now()
		require.NoError(t, lb.Pause(t.Context(), "k", time.Second))
		var woke []time.Duration
		for range 3 {
			require.NoError(t, throttle.Wait(t.Context(), lb, "k", 1))
			woke = append(woke, time.Since(start))
		}
		assert.Equal(t, []time.Duration{time.Second, 1100 * time.Millisecond, 1200 * time.Millisecond}, woke, "evenly spaced after the pause")
	})
}

// fakeBooking is a Booking of a limiter outside this package.
type fakeBooking struct {
	mu        sync.Mutex
	at        time.Time
	cancelled int
}

func (b *fakeBooking) Until() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Until(b.at)
}

func (b *fakeBooking) Cancel(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cancelled++
	return ctx.Err()
}

func (b *fakeBooking) cancels() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cancelled
}

func TestNewReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBooking{at: time.Now().Add(time.Second)}
		r := throttle.NewReservation(b, time.Second, 4)
		assert.Equal(t, throttle.Reservation{OK: true, Delay: time.Second, Remaining: 4}.Remaining, r.Remaining)
		assert.True(t, r.OK)

		start := time.Now()
		time.AfterFunc(500*time.Millisecond, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.at = b.at.Add(2 * time.Second) // the limiter learned of a pause
		})
		require.NoError(t, r.Wait(t.Context()))
		assert.Equal(t, 3*time.Second, time.Since(start), "Wait follows Until")
		require.NoError(t, r.Cancel(t.Context()))
		assert.Zero(t, b.cancels(), "nothing to give back once Wait returned")
	})
}

func TestNewReservationCancelledByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBooking{at: time.Now().Add(time.Second)}
		r := throttle.NewReservation(b, time.Second, 0)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)

		err := r.Wait(ctx)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 1, b.cancels(), "cancelled once, with a live context")
		require.NoError(t, r.Cancel(t.Context()))
		assert.Equal(t, 1, b.cancels(), "idempotent")
		assert.False(t, errors.Is(err, throttle.ErrLimitExceeded))
	})
}

func TestCancelOfUnitsDueBeforeAPause(t *testing.T) {
	clk := newManualClock()
	tb := newTokenBucket(t, throttle.Rate{N: 1, Per: 10 * time.Second}, 1, throttle.WithClock(clk.Now))
	ctx := context.Background()

	r := reserve(t, tb, 1, 0) // due at 0 and sent
	clk.Advance(500 * time.Millisecond)
	require.NoError(t, tb.Pause(ctx, "k", time.Second))
	clk.Advance(500 * time.Millisecond)
	require.NoError(t, r.Cancel(ctx), "the pause moved its mark to 1s, but the units were spent at 0")

	clk.Advance(500 * time.Millisecond) // the pause is over
	ok, err := throttle.Allow(ctx, tb, "k", 1)
	require.NoError(t, err)
	assert.False(t, ok, "one unit per 10s: nothing came back")
}

func TestPauseLeavesDueSlotsInPlace(t *testing.T) {
	clock := newManualClock()
	tb := newTokenBucket(t, throttle.PerSecond(10), 1, throttle.WithClock(clock.Now))
	ctx := context.Background()
	due, err := tb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	ahead, err := tb.Reserve(ctx, "k", 1, -1)
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, ahead.Delay)

	clock.Advance(time.Millisecond)
	require.NoError(t, tb.Pause(ctx, "k", time.Second))

	// The first slot was due before the pause: its caller may be about to
	// send, and it must not be held back a second time. The second moves.
	waitCtx, cancel := context.WithTimeout(ctx, 0)
	defer cancel()
	assert.NoError(t, due.Wait(waitCtx))
	var limitErr *throttle.LimitError
	require.ErrorAs(t, ahead.Wait(waitCtx), &limitErr)
	assert.Equal(t, time.Second+99*time.Millisecond, limitErr.RetryAfter)
}

// TestPausesLeaveDueUnitsDue pauses a key several times while a unit is
// due but its caller has not yet woken: the unit stays due, whatever the
// pauses after the one that found it due.
func TestPausesLeaveDueUnitsDue(t *testing.T) {
	tests := []struct {
		name       string
		givePauses []struct{ at, d time.Duration }
		wantAhead  time.Duration // when a unit booked after the pauses is due (the due unit spent 1ms of the bucket)
	}{
		{name: "two at one instant", givePauses: []struct{ at, d time.Duration }{{0, time.Second}, {0, 2 * time.Second}}, wantAhead: 2001 * time.Millisecond},
		{name: "overlapping, each longer", givePauses: []struct{ at, d time.Duration }{{0, time.Second}, {100 * time.Millisecond, 3 * time.Second}, {200 * time.Millisecond, 5 * time.Second}}, wantAhead: 5201 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				tb := newTokenBucket(t, throttle.PerSecond(1000), 1)
				due := reserve(t, tb, 1, -1)
				require.Equal(t, time.Duration(0), due.Delay)
				for _, p := range tt.givePauses {
					time.Sleep(p.at - time.Since(start))
					require.NoError(t, tb.Pause(context.Background(), "k", p.d))
				}
				require.NoError(t, due.Wait(context.Background()))
				assert.Equal(t, tt.givePauses[len(tt.givePauses)-1].at, time.Since(start), "due before the pauses: no sleep")

				require.NoError(t, throttle.Wait(context.Background(), tb, "k", 1))
				assert.Equal(t, tt.wantAhead, time.Since(start))
			})
		})
	}
}
