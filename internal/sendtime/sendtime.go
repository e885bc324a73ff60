// Package sendtime stamps each outgoing attempt with the time it was
// sent, so that a test upstream can tell the requests sent after it
// answered 429 from those already on the wire. The examples and the
// benchmarks share it.
package sendtime

import (
	"net/http"
	"strconv"
	"time"
)

// Header carries the time, in Unix nanoseconds, at which the client sent
// the attempt.
const Header = "X-Sent-At"

// Stamp wraps base (nil means http.DefaultTransport) so that every
// attempt carries [Header], set as it is sent. It goes innermost, under
// any limiter or retry layer, so that each retry is stamped too.
func Stamp(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return stamp{base: base}
}

// Of returns the time r was sent, or the zero Time if it carries none.
func Of(r *http.Request) time.Time {
	ns, err := strconv.ParseInt(r.Header.Get(Header), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

type stamp struct{ base http.RoundTripper }

func (s stamp) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(Header, strconv.FormatInt(time.Now().UnixNano(), 10))
	return s.base.RoundTrip(r)
}

// CloseIdleConnections forwards to the base transport.
func (s stamp) CloseIdleConnections() {
	if c, ok := s.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
