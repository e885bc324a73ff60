package egress_test

import (
	"context"
	"io"
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

// TestCancelAtEachStage cancels a request 500ms after it starts, while it
// waits in the queue's line, sleeps to its limiter slot, backs off before
// a retry, or is on the wire. Each time it stops at once, closes its body
// and leaves nothing held. It returns the context's error, except where a
// response has already arrived: that response is the answer.
func TestCancelAtEachStage(t *testing.T) {
	tests := []struct {
		name        string
		giveBusy    bool // another request holds the only queue slot
		giveBooked  bool // another request took the key's only unit
		giveAnswer  func(req *http.Request, n int) (*http.Response, error)
		giveLatency time.Duration
		wantSent    int
		wantStatus  int // 0: no response, and the context's error
	}{
		{name: "in the queue's line", giveBusy: true},
		{name: "asleep to its slot", giveBooked: true},
		{
			name: "backing off before a retry",
			giveAnswer: func(req *http.Request, n int) (*http.Response, error) {
				return respond(req, http.StatusServiceUnavailable, "Retry-After", "10"), nil
			},
			wantSent:   1,
			wantStatus: http.StatusServiceUnavailable,
		},
		{name: "in flight", giveLatency: 10 * time.Second, wantSent: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{answer: tt.giveAnswer, latency: tt.giveLatency}
				l := newTokenBucket(t, throttle.PerSecond(1), 1)
				q := newQueue(t, 1, 1)
				tr := egress.NewTransport(base, egress.WithLimiter(l), egress.WithQueue(q), egress.WithRetry(retryafter.Policy{}))
				if tt.giveBusy {
					release, ok := q.TryAcquire()
					require.True(t, ok)
					defer release()
				}
				if tt.giveBooked {
					require.NoError(t, throttle.Wait(context.Background(), l, "api.test", 1))
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req := replayable(t, ctx, http.MethodPut)
				var bodies []*trackedBody
				req.Body = newTrackedBody("payload")
				bodies = append(bodies, req.Body.(*trackedBody))
				req.GetBody = func() (io.ReadCloser, error) {
					b := newTrackedBody("payload")
					bodies = append(bodies, b)
					return b, nil
				}
				go func() {
					time.Sleep(500 * time.Millisecond)
					cancel()
				}()
				start := time.Now()

				resp, err := tr.RoundTrip(req)

				assert.Equal(t, 500*time.Millisecond, time.Since(start), "it stops at once")
				if tt.wantStatus == 0 {
					assert.Nil(t, resp)
					assert.ErrorIs(t, err, context.Canceled)
				} else {
					require.NoError(t, err)
					assert.Equal(t, tt.wantStatus, resp.StatusCode)
					synctest.Wait() // the context's end releases the slot
					drainClose(t, resp)
				}
				for _, b := range bodies {
					assert.Equal(t, int32(1), b.closes.Load(), "every body is closed")
				}
				wantHeld := 0
				if tt.giveBusy {
					wantHeld = 1
				}
				assert.Equal(t, wantHeld, tr.Stats().InFlight)
				assert.Equal(t, 0, tr.Stats().Waiting)
				assert.Equal(t, tt.wantSent, base.count())
			})
		})
	}
}

func TestCancelGivesBackTheReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{}
		l := newTokenBucket(t, throttle.PerSecond(1), 1)
		tr := egress.NewTransport(base, egress.WithLimiter(l))
		send := func(ctx context.Context) error {
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
			if err == nil {
				drainClose(t, resp)
			}
			return err
		}
		require.NoError(t, send(context.Background())) // takes the unit at 0s
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- send(ctx) }() // would be sent at 1s
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)

		require.NoError(t, send(context.Background()))

		times := base.times()
		require.Len(t, times, 2)
		assert.Equal(t, time.Second, times[1].Sub(times[0]), "the cancelled slot went to the next caller")
	})
}

func TestPauseBeyondTheDeadlineRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			if n == 0 {
				return respond(req, http.StatusTooManyRequests, "Retry-After", "30"), nil
			}
			return respond(req, http.StatusOK), nil
		}, latency: 100 * time.Millisecond}
		l := newTokenBucket(t, throttle.PerSecond(1), 1)
		tr := egress.NewTransport(base, egress.WithLimiter(l))
		first := make(chan *http.Response, 1)
		go func() {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
			assert.NoError(t, err)
			first <- resp
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()

		// Booked for 1s, well within the deadline; at 100ms the 429 pauses
		// the key for 30s, past it.
		_, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))

		var le *throttle.LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, "api.test", le.Key)
		assert.True(t, le.Timeout())
		assert.Equal(t, time.Second, time.Since(start), "it finds out when it wakes for its slot")
		drainClose(t, <-first)
	})
}
