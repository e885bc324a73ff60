package throttle

import (
	"context"
	"time"
)

// handle is a key's state as seen from a booking on it.
type handle interface {
	wait(m mark) time.Duration
	give(m mark)
}

// part is one booking on one key of one built-in limiter.
type part struct {
	h handle
	m mark
}

// localBooking is the Booking of the built-in limiters: one part, or
// several booked at one common slot by All.
type localBooking struct {
	one   part
	*more // nil unless All booked several parts
}

// more holds the parts of an All booking beyond the first, kept apart so
// that the common single-part Reservation stays small.
type more struct {
	parts []part
	ext   []*Reservation // parts from limiters outside this package
}

// Until implements [Booking]: the longest wait among the parts.
func (b *localBooking) Until() time.Duration {
	var d time.Duration
	if b.one.h != nil {
		d = b.one.h.wait(b.one.m)
	}
	if b.more == nil {
		return d
	}
	for i := range b.parts {
		d = max(d, b.parts[i].h.wait(b.parts[i].m))
	}
	for _, r := range b.ext {
		if r.held() {
			d = max(d, r.until())
		}
	}
	return d
}

// Cancel implements [Booking]: it gives back every part, and returns the
// first error from a part outside this package.
func (b *localBooking) Cancel(ctx context.Context) error {
	if b.one.h != nil {
		b.one.h.give(b.one.m)
	}
	if b.more == nil {
		return nil
	}
	for i := range b.parts {
		b.parts[i].h.give(b.parts[i].m)
	}
	var first error
	for _, r := range b.ext {
		if err := r.Cancel(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
