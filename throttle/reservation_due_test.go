package throttle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/throttle"
)

// askedBooking counts the calls of its Until and Cancel.
type askedBooking struct {
	until   time.Duration
	asked   atomic.Int32
	cancels atomic.Int32
}

func (b *askedBooking) Until() time.Duration {
	b.asked.Add(1)
	return b.until
}

func (b *askedBooking) Cancel(context.Context) error {
	b.cancels.Add(1)
	return nil
}

// TestWaitDueWhenBooked checks that a reservation due when it was booked
// is the caller's at once: Wait asks the booking nothing (no clock read),
// and the units count as used, so a later Cancel gives nothing back.
func TestWaitDueWhenBooked(t *testing.T) {
	tests := []struct {
		name      string
		giveDelay time.Duration
		wantAsked int32
	}{
		{name: "due", giveDelay: 0, wantAsked: 0},
		{name: "overdue", giveDelay: -time.Second, wantAsked: 0},
		{name: "ahead, due by now", giveDelay: time.Second, wantAsked: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &askedBooking{}
			r := throttle.NewReservation(b, tt.giveDelay, 0)
			assert.NoError(t, r.Wait(context.Background()))
			assert.NoError(t, r.Cancel(context.Background()))
			assert.Equal(t, tt.wantAsked, b.asked.Load())
			assert.Equal(t, int32(0), b.cancels.Load())
		})
	}
}
