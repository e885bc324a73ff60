package throttle

import (
	"context"
	"time"
)

// handle is a key's state as seen from a booking on it.
type handle interface {
	wait(m *mark) time.Duration
	give(m *mark)
}

// part is one booking on one key of one built-in limiter.
type part struct {
	h handle
	m mark
}

// localBooking is the Booking of the built-in limiters: one part, or
// several booked at one common slot by All.
type localBooking struct {
	one  part
	more []part
	ext  []*Reservation // parts from limiters outside this package
}

// Until implements [Booking]: the longest wait among the parts.
func (b *localBooking) Until() time.Duration {
	var d time.Duration
	if b.one.h != nil {
		d = b.one.h.wait(&b.one.m)
	}
	for i := range b.more {
		d = max(d, b.more[i].h.wait(&b.more[i].m))
	}
	for _, r := range b.ext {
		if r.booking != nil {
			d = max(d, r.booking.Until())
		}
	}
	return d
}

// Cancel implements [Booking]: it gives back every part, and returns the
// first error from a part outside this package.
func (b *localBooking) Cancel(ctx context.Context) error {
	if b.one.h != nil {
		b.one.h.give(&b.one.m)
	}
	for i := range b.more {
		b.more[i].h.give(&b.more[i].m)
	}
	var first error
	for _, r := range b.ext {
		if err := r.Cancel(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
