package throttle_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// holdingLimiter never places the units: it holds every call for hold,
// whatever its max wait. After maxCalls calls it gives up with an error,
// so that a Wait that never stops reserving fails instead of hanging.
type holdingLimiter struct {
	hold     time.Duration
	calls    int
	maxCalls int
}

func (l *holdingLimiter) Reserve(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
	l.calls++
	if l.calls > l.maxCalls {
		return nil, errors.New("still reserving after maxCalls holds")
	}
	return throttle.Hold(l.hold, 0), nil
}

// TestWaitEndsOnHolds: throttle.Wait waits out a limiter's holds, but not
// past ctx's deadline (a hold that ends past it refuses at once), and,
// without a deadline, not past DefaultMaxHold in all. A limiter that kept
// holding had Wait reserve again forever without a deadline, and sleep
// to the deadline only to fail with the context's error with one.
func TestWaitEndsOnHolds(t *testing.T) {
	tests := []struct {
		name         string
		giveHold     time.Duration
		giveTimeout  time.Duration // 0: no deadline
		wantWaited   time.Duration
		wantDeadline bool
	}{
		{name: "no deadline", giveHold: 10 * time.Millisecond, wantWaited: throttle.DefaultMaxHold, wantDeadline: false},
		{name: "a hold past DefaultMaxHold", giveHold: 2 * throttle.DefaultMaxHold, wantWaited: 0, wantDeadline: false},
		{name: "holds use up the deadline", giveHold: 10 * time.Millisecond, giveTimeout: 50 * time.Millisecond, wantWaited: 50 * time.Millisecond, wantDeadline: true},
		{name: "a hold past the deadline", giveHold: time.Second, giveTimeout: 50 * time.Millisecond, wantWaited: 0, wantDeadline: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &holdingLimiter{hold: tt.giveHold, maxCalls: 100_000}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if tt.giveTimeout > 0 {
					ctx, cancel = context.WithTimeout(ctx, tt.giveTimeout)
				}
				defer cancel()

				start := time.Now()
				err := throttle.Wait(ctx, l, "k", 1)

				var le *throttle.LimitError
				require.ErrorAs(t, err, &le)
				assert.Equal(t, tt.wantWaited, time.Since(start))
				assert.Equal(t, tt.wantDeadline, le.Timeout())
				assert.Equal(t, "k", le.Key)
			})
		})
	}
}

// nilLimiter returns neither a Reservation nor an error.
type nilLimiter struct{}

func (nilLimiter) Reserve(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
	return nil, nil
}

// TestWaitNilReservation: a limiter that returns no Reservation and no
// error is an error naming the key, not a nil pointer panic.
func TestWaitNilReservation(t *testing.T) {
	err := throttle.Wait(context.Background(), nilLimiter{}, "api.test", 1)

	assert.ErrorContains(t, err, `key "api.test"`)
	assert.ErrorContains(t, err, "nil Reservation")
}
