package egress

import (
	"context"
	"errors"
	"net/http"

	"github.com/egress-go/egress/throttle"
)

// ErrNothingToSettle is returned by [Settle] for a response that holds no
// reservation: it did not come through a Transport with [WithEstimate],
// or its request booked nothing (its costs were all 0, or its context
// carried [WithRequestCost]).
var ErrNothingToSettle = errors.New("egress: the response holds no reservation to settle")

// booking is the context key under which the request sent for an
// attempt carries the attempt's reservation, for Settle to find through
// resp.Request.
type booking struct{}

// Settle tells the limiter what the call that brought resp really cost,
// once the caller knows it: one value per part, in the order the
// [WithEstimate] func gave the estimate, such as the usage an LLM API
// states at the end of its body. A smaller actual gives the difference
// back, a larger one is charged, both at the booking's own slot; see
// [throttle.Reservation.Settle] for what a give-back may keep.
//
// Call it after reading the usage: for a streamed (server-sent events)
// body, after the event that states it, before or after closing the
// body. resp must be the *http.Response the Transport returned (through
// an [http.Client] too, whose Timeout wraps the body); Settle finds the
// reservation through resp.Request's context, so a replaced body does not
// matter. When a retry was made, it settles the attempt that brought
// resp; attempts answered with a 429 keep their estimate. So do the
// redirects an [http.Client] follows: each hop is a request of its own,
// booked at its estimate, and resp is the last hop's. Settle a redirect
// in the Client's CheckRedirect, where req.Response is the redirect
// (egress.Settle(req.Response, ...)), or with [WithActual]. A request whose
// connection could not be made gives its estimate back at once; one that
// failed after it may have reached the upstream keeps it.
//
// The first Settle wins (including one made by [WithActual]); later ones
// do nothing and return nil. A response never settled keeps its
// estimate: nothing else is held for it, and no goroutine waits. Settle
// runs under a context detached from the request's, bounded by
// [throttle.CancelTimeout], since the request's context has often ended
// by then. It returns [ErrNothingToSettle] when resp holds no
// reservation, and the limiter's error for a wrong number of values or a
// negative one.
func Settle(resp *http.Response, actual ...int) error {
	r := bookingOf(resp)
	if r == nil {
		return ErrNothingToSettle
	}
	ctx, stop := context.WithTimeout(context.WithoutCancel(resp.Request.Context()), throttle.CancelTimeout)
	defer stop()
	return r.Settle(ctx, actual...)
}

// bookingOf returns the reservation resp's attempt was sent with, or nil.
func bookingOf(resp *http.Response) *throttle.Reservation {
	if resp == nil || resp.Request == nil {
		return nil
	}
	r, _ := resp.Request.Context().Value(booking{}).(*throttle.Reservation)
	return r
}

// WithActual makes f read what a call really cost from its response, for
// upstreams that state the usage in headers: when f reports ok, the
// Transport settles the attempt's reservation to actual (see [Settle])
// before it returns the response, and a later Settle does nothing. f is
// called for every attempt's response, 429s included, and only with
// [WithEstimate]; a settle that fails (actual has the wrong length, or a
// negative value) leaves the estimate booked, and the caller may still
// call Settle. f must not read the body, and must be safe for concurrent
// use. WithActual panics if f is nil.
func WithActual(f func(*http.Response) (actual []int, ok bool)) Option {
	if f == nil {
		panic("egress: WithActual given a nil func")
	}
	return optionFunc(func(t *Transport) { t.actual = f })
}

// settleFrom settles the attempt that brought resp from its headers, when
// WithActual reads a cost there.
func (c *call) settleFrom(resp *http.Response) {
	if c.t.actual == nil || c.booked == nil {
		return
	}
	if actual, ok := c.t.actual(resp); ok {
		_ = Settle(resp, actual...)
	}
}
