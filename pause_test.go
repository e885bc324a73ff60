package egress_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// TestConcurrentPause queues 50 callers on one key at 10/s. The fifth
// request sent is answered 429 with Retry-After: 2, while the other 45
// sleep to slots already booked. All of them follow the pause: nothing is
// sent for 2s after the 429 arrives, and then every request, the retried
// one included, goes at the sustained rate, with no burst.
func TestConcurrentPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			callers  = 50
			interval = 100 * time.Millisecond
			latency  = 10 * time.Millisecond
			pause    = 2 * time.Second
		)
		base := &fakeBase{latency: latency, answer: func(req *http.Request, n int) (*http.Response, error) {
			if n == 4 {
				return respond(req, http.StatusTooManyRequests, "Retry-After", "2"), nil
			}
			return respond(req, http.StatusOK), nil
		}}
		var pauses []egress.PauseInfo
		tr := egress.NewTransport(base,
			egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(10), 1)),
			egress.WithRetry(retryafter.Policy{Jitter: zeroJitter}),
			egress.WithMaxWait(-1),
			egress.WithObserver(&egress.Observer{Paused: func(i egress.PauseInfo) { pauses = append(pauses, i) }}),
		)

		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
				if assert.NoError(t, err) {
					assert.Equal(t, http.StatusOK, resp.StatusCode)
					drainClose(t, resp)
				}
			})
		}
		wg.Wait()

		sent := base.times()
		require.Len(t, sent, callers+1, "one retry")
		require.Len(t, pauses, 1)
		tooMany := sent[4].Add(latency) // when the 429 arrived
		var after []time.Time
		for _, s := range sent[5:] {
			assert.False(t, s.Before(tooMany.Add(pause)), "sent %v into the pause", s.Sub(tooMany))
			after = append(after, s)
		}
		require.Len(t, after, callers-4)
		assert.Less(t, after[0].Sub(tooMany), pause+interval, "sending resumes when the pause ends")
		for i := 1; i < len(after); i++ {
			assert.Equal(t, interval, after[i].Sub(after[i-1]), "send %d after the pause", i)
		}
	})
}
