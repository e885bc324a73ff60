package egress

import (
	"errors"
	"fmt"
)

// errNilResponse is returned when the base RoundTripper breaks its
// contract by returning neither a response nor an error.
var errNilResponse = errors.New("egress: base RoundTripper returned a nil response and a nil error")

// refusal is a request the Transport did not send because the queue was
// full or the limiter failed. It names the key, and unwraps to the cause,
// so errors.Is(err, queue.ErrFull) holds through it.
type refusal struct {
	key string
	err error
}

func (e *refusal) Error() string {
	return fmt.Sprintf("egress: request for key %q not sent: %v", e.key, e.err)
}

func (e *refusal) Unwrap() error { return e.err }

// errNotReplayable stops a retry whose body cannot be read again.
var errNotReplayable = errors.New("egress: request body cannot be replayed: GetBody is nil")
