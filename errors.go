package egress

import (
	"errors"
	"fmt"
)

// errNilResponse is returned when the base RoundTripper breaks its
// contract by returning neither a response nor an error.
var errNilResponse = errors.New("egress: base RoundTripper returned a nil response and a nil error")

// errNilReservation is returned when the limiter breaks its contract by
// returning neither a reservation nor an error.
var errNilReservation = errors.New("egress: limiter returned a nil reservation and a nil error")

// errNilURL is returned for a request without a URL, as net/http's own
// Transport does.
var errNilURL = errors.New("egress: nil Request.URL")

// notSentError is a request the Transport did not send because the queue
// was full or the limiter failed. It names the key, and unwraps to the
// cause, so errors.Is(err, queue.ErrFull) holds through it.
type notSentError struct {
	key string
	err error
}

func (e *notSentError) Error() string {
	return fmt.Sprintf("egress: request for key %q not sent: %v", e.key, e.err)
}

func (e *notSentError) Unwrap() error { return e.err }

// errNotReplayable stops a retry whose body cannot be read again.
var errNotReplayable = errors.New("egress: request body cannot be replayed: GetBody is nil")

// ErrBodyCut is the error a response's body fails with after its first
// 64 KiB when the response was set aside for a retry and then returned
// after all (the retry could not be made, or the policy's attempts ran
// out): the rest was closed unread before the retry, so that the retry
// could have the connection.
var ErrBodyCut = errors.New("egress: the body of a response set aside for a retry was cut at 64 KiB to free its connection")
