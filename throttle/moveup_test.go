package throttle_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// waitIn starts r.Wait(ctx) in a goroutine and returns where its result
// and how long it slept arrive.
func waitIn(ctx context.Context, r *throttle.Reservation) (<-chan error, *time.Duration) {
	done, slept := make(chan error, 1), new(time.Duration)
	start := time.Now()
	go func() {
		err := r.Wait(ctx)
		*slept = time.Since(start)
		done <- err
	}()
	return done, slept
}

var moveUp = []throttle.Option{throttle.WithMoveUp()}

func TestMoveUpOnSettle(t *testing.T) {
	// 10/s, burst 10: 8 units now, then 8 more due at 600ms. The first
	// call settles 100ms later.
	tests := []struct {
		name       string
		giveOpts   []throttle.Option
		giveActual int
		wantSlept  time.Duration
	}{
		{name: "used all", giveOpts: moveUp, giveActual: 8, wantSlept: 600 * time.Millisecond},
		{name: "used 5: 3 units back", giveOpts: moveUp, giveActual: 5, wantSlept: 300 * time.Millisecond},
		{name: "used 2: due at once", giveOpts: moveUp, giveActual: 2, wantSlept: 100 * time.Millisecond},
		{name: "charged 10", giveOpts: moveUp, giveActual: 10, wantSlept: 600 * time.Millisecond},
		{name: "used 2, without WithMoveUp", giveActual: 2, wantSlept: 600 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 10, tt.giveOpts...)
				require.NoError(t, err)
				first, err := tb.Reserve(ctx, "k", 8, -1)
				require.NoError(t, err)
				require.NoError(t, first.Wait(ctx))
				second, err := tb.Reserve(ctx, "k", 8, -1)
				require.NoError(t, err)
				require.Equal(t, 600*time.Millisecond, second.Delay)
				done, slept := waitIn(ctx, second)
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
				require.NoError(t, first.Settle(ctx, tt.giveActual))
				require.NoError(t, <-done)
				assert.Equal(t, tt.wantSlept, *slept)
			})
		})
	}
}

// TestMoveUpKeepsSpacing: three callers asleep move up together, in
// their order, as far as the bucket's burst and spacing allow, and a
// booking made after them goes after them.
func TestMoveUpKeepsSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 5, throttle.WithMoveUp())
		require.NoError(t, err)
		first, err := tb.Reserve(ctx, "k", 5, -1)
		require.NoError(t, err)
		require.NoError(t, first.Wait(ctx))
		var dones []<-chan error
		var slepts []*time.Duration
		for i := range 3 {
			r, err := tb.Reserve(ctx, "k", 2, -1)
			require.NoError(t, err)
			require.Equal(t, time.Duration(i+1)*200*time.Millisecond, r.Delay)
			done, slept := waitIn(ctx, r)
			dones, slepts = append(dones, done), append(slepts, slept)
		}
		synctest.Wait()
		// 4 units back: 1 + 2 + 2 fill the burst now, the third 2 units
		// follow 200ms later.
		require.NoError(t, first.Settle(ctx, 1))
		after, err := tb.Reserve(ctx, "k", 2, -1)
		require.NoError(t, err)
		assert.Equal(t, 400*time.Millisecond, after.Delay, "after the three that moved up")
		for i, want := range []time.Duration{0, 0, 200} {
			require.NoError(t, <-dones[i])
			assert.Equal(t, want*time.Millisecond, *slepts[i], "caller %d", i)
		}
	})
}

// TestMoveUpParts: a caller booked on three buckets through ReserveParts
// moves up on all of them, to one slot, when one part gives back; it
// moves only as far as the tightest part allows.
func TestMoveUpParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		rpm, err := throttle.NewTokenBucket(throttle.PerSecond(10), 10, throttle.WithMoveUp())
		require.NoError(t, err)
		itpm, err := throttle.NewTokenBucket(throttle.PerSecond(100), 100, throttle.WithMoveUp())
		require.NoError(t, err)
		otpm, err := throttle.NewTokenBucket(throttle.PerSecond(100), 100, throttle.WithMoveUp())
		require.NoError(t, err)
		budget := throttle.All(rpm, itpm, otpm).(throttle.PartsReserver)
		first, err := budget.ReserveParts(ctx, "k", []int{1, 60, 100}, -1)
		require.NoError(t, err)
		require.NoError(t, first.Wait(ctx))
		second, err := budget.ReserveParts(ctx, "k", []int{1, 60, 100}, -1)
		require.NoError(t, err)
		require.Equal(t, time.Second, second.Delay, "output tokens bind")
		done, slept := waitIn(ctx, second)
		synctest.Wait()
		// The output is 30 of 100: the second call's 100 fit at 300ms
		// (the input's 60 would fit at 200ms).
		require.NoError(t, first.Settle(ctx, 1, 60, 30))

		// Every part holds the second call at its new slot: one unit of
		// the input bucket alone is due 10ms past the 120 booked by then,
		// less the burst (it was 610ms with the second call at 1s).
		r, err := itpm.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		assert.Equal(t, 210*time.Millisecond, r.Delay)
		require.NoError(t, <-done)
		assert.Equal(t, 300*time.Millisecond, *slept)
	})
}

// TestMoveUpThenCancel: a caller that moved up and whose context ends
// gives its units back in full, as the key's latest booking.
func TestMoveUpThenCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 10, throttle.WithMoveUp())
		require.NoError(t, err)
		first, err := tb.Reserve(t.Context(), "k", 10, -1)
		require.NoError(t, err)
		require.NoError(t, first.Wait(t.Context()))
		second, err := tb.Reserve(t.Context(), "k", 5, -1)
		require.NoError(t, err)
		require.Equal(t, 500*time.Millisecond, second.Delay)
		ctx, cancel := context.WithCancel(t.Context())
		done, _ := waitIn(ctx, second)
		synctest.Wait()
		require.NoError(t, first.Settle(t.Context(), 5)) // 5 + 5 units: the second is due now
		require.NoError(t, <-done)

		third, err := tb.Reserve(t.Context(), "k", 5, -1)
		require.NoError(t, err)
		require.Equal(t, 500*time.Millisecond, third.Delay)
		fourth, err := tb.Reserve(t.Context(), "k", 5, -1)
		require.NoError(t, err)
		require.Equal(t, time.Second, fourth.Delay)
		done, _ = waitIn(ctx, fourth)
		synctest.Wait()
		require.NoError(t, third.Cancel(t.Context())) // not the latest: the fourth moves up to 500ms
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)

		// Both gone in full: 5 units are due at 500ms, after the second's.
		r, err := tb.Reserve(t.Context(), "k", 5, -1)
		require.NoError(t, err)
		assert.Equal(t, 500*time.Millisecond, r.Delay)
	})
}
