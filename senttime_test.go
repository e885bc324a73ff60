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
	"github.com/egress-go/egress/throttle"
)

// slowToLearn is a limiter whose Learn takes a while for the requests
// whose context says so: a busy machine, where the goroutine that hands
// an answer to the record runs late.
type slowToLearn struct {
	throttle.Limiter
}

type slowLearnKey struct{}

func (slowToLearn) Learn(ctx context.Context, _ string, _ throttle.Outcome) error {
	if d, ok := ctx.Value(slowLearnKey{}).(time.Duration); ok {
		time.Sleep(d)
	}
	return nil
}

// The record dates a request's send from its answer's latency, counted
// back from when it learns the answer. An answer handed to it late (the
// configured limiter's Learn, settling, a busy machine) seemed sent that
// much later: after an answer that arrived before it, though the upstream
// had handled it first. Its higher remaining then read as a window that
// grew, a sliding window, whose 0 left no longer held anything back: on
// bench 5c (sethvargo/go-limiter's fixed window), the README recipe
// configured 25% too high and WithRetry alone met 81-242 429s in 3 of 12
// rows on a busy machine. The Transport now hands the record the time
// since the send, up to the call: 0 in 12.
func TestAnswerLearnedLateIsDatedFromItsSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			// The first request is handled first and leaves 1; the
			// second, sent with it, leaves 0 and is answered later.
			remaining, took := "9", time.Millisecond
			switch req.Header.Get("X-Which") {
			case "first":
				remaining = "1"
			case "second":
				remaining, took = "0", 2*time.Millisecond
			}
			time.Sleep(took)
			return respond(req, http.StatusOK, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", remaining, "X-RateLimit-Reset", "5"), nil
		})
		open, err := throttle.NewTokenBucket(throttle.PerSecond(1000), 1000)
		require.NoError(t, err)
		u, err := throttle.NewUpstream()
		require.NoError(t, err)
		client := &http.Client{Transport: egress.NewTransport(base,
			egress.WithLimiter(slowToLearn{open}), egress.WithUpstream(u))}
		get := func(ctx context.Context, which string) time.Duration {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
			require.NoError(t, err)
			req.Header.Set("X-Which", which)
			resp, err := client.Do(req)
			require.NoError(t, err)
			drainClose(t, resp)
			return time.Since(start)
		}
		var wg sync.WaitGroup
		wg.Go(func() { get(context.WithValue(t.Context(), slowLearnKey{}, 5*time.Millisecond), "first") })
		wg.Go(func() { get(t.Context(), "second") })
		wg.Wait()
		// The second's "0 left" arrived at 2 ms; the first's "1 left" at
		// 1 ms, learned at 6 ms. Dated from 6 ms, the first seemed sent
		// at 5 ms, after the second's answer arrived.
		took := get(t.Context(), "third")
		assert.GreaterOrEqual(t, took, 5*time.Second, "0 left until the reset 5 s after the answers: held there")
	})
}
