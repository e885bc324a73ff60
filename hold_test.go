package egress_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
)

// holdingLimiter is a limiter that never places the units: it holds every
// call for hold, whatever its max wait.
type holdingLimiter struct{ hold time.Duration }

func (l holdingLimiter) Reserve(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
	return throttle.Hold(l.hold, 0), nil
}

// TestHoldsEndAtTheMaxWait: a limiter's holds ([throttle.Reservation.Held])
// count against the call's max wait, and a hold past what is left of it
// refuses the call, as a slot past it does. A limiter that kept holding
// had the Transport book again and again past the max wait: until the
// context's deadline, which then failed with the context's error instead
// of a refusal, or forever without one.
func TestHoldsEndAtTheMaxWait(t *testing.T) {
	tests := []struct {
		name        string
		giveHold    time.Duration
		giveMaxWait time.Duration
		wantWaited  time.Duration
	}{
		{name: "holds use up the wait", giveHold: 10 * time.Millisecond, giveMaxWait: 50 * time.Millisecond, wantWaited: 50 * time.Millisecond},
		{name: "a hold past the wait", giveHold: time.Second, giveMaxWait: 50 * time.Millisecond, wantWaited: 0},
		{name: "only now", giveHold: 10 * time.Millisecond, giveMaxWait: 0, wantWaited: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				body := newTrackedBody("payload")
				base := &fakeBase{}
				tr := egress.NewTransport(base, egress.WithLimiter(holdingLimiter{hold: tt.giveHold}), egress.WithMaxWait(tt.giveMaxWait))
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				req := newRequest(t, ctx, http.MethodPost, "http://api.test/", nil)
				req.Body = body

				start := time.Now()
				resp, err := tr.RoundTrip(req)

				require.ErrorIs(t, err, throttle.ErrLimitExceeded)
				assert.Nil(t, resp)
				assert.Equal(t, tt.wantWaited, time.Since(start))
				assert.Zero(t, base.count(), "nothing was sent")
				assert.Equal(t, int32(1), body.closes.Load(), "the body is closed")
			})
		})
	}
}
