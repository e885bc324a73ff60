package egressotel_test

import (
	"context"
	"net/http"
	"time"

	"github.com/egress-go/egress/throttle"
)

// stepLimiter grants every request after a short wait, so that every
// attempt waits a known nonzero time, refuses the key "refuse", and
// accepts pauses without shifting anything.
type stepLimiter struct {
	wait time.Duration
}

func (l stepLimiter) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	if key == "refuse" {
		return throttle.Refused(time.Minute, 0), nil
	}
	return throttle.NewReservation(deadline(time.Now().Add(l.wait)), l.wait, 0), nil
}

func (stepLimiter) Pause(ctx context.Context, key string, d time.Duration) error { return nil }

// deadline is a Booking whose units are the caller's at a fixed time.
type deadline time.Time

func (d deadline) Until() time.Duration           { return time.Until(time.Time(d)) }
func (deadline) Cancel(ctx context.Context) error { return nil }

// memBase is an in-memory base RoundTripper: 200, empty body.
type memBase struct{}

func (memBase) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}
