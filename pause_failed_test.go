package egress_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// failingPauser is a limiter whose pauses fail, as a Redis budget's do
// under FailClosed while Redis is away.
type failingPauser struct{ throttle.Limiter }

func (failingPauser) Pause(context.Context, string, time.Duration) error {
	return errors.New("pause not recorded")
}

// TestFailedPauseIsNotCounted: Stats.Pauses counts the times a response
// paused its key; a pause the limiter failed to record paused nothing.
// The Observer still hears of it, with its error.
func TestFailedPauseIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			if n == 0 {
				return respond(req, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return respond(req, http.StatusOK), nil
		}}
		var heard []error
		tr := egress.NewTransport(base,
			egress.WithLimiter(failingPauser{mustTokenBucket(t, throttle.PerSecond(10), 10)}),
			egress.WithRetry(retryafter.Policy{}),
			egress.WithObserver(&egress.Observer{Paused: func(p egress.PauseInfo) { heard = append(heard, p.Err) }}))
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
		require.NoError(t, err)
		drainClose(t, resp)
		assert.Zero(t, tr.Stats().Pauses)
		require.Len(t, heard, 1)
		assert.Error(t, heard[0])
	})
}
