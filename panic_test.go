package egress_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// TestPanicClosesTheBodies: a panic in a func the caller gave the
// Transport (WithKey, an Observer callback) unwinds RoundTrip. The
// request's body, not yet handed to the base RoundTripper, must still be
// closed, as http.RoundTripper's contract requires on every path, and the
// body of a response in hand is closed too, or it held its connection.
// Before, the slot came back (TestPanicReleasesTheSlot) but every body was
// left open.
func TestPanicClosesTheBodies(t *testing.T) {
	boom := func() { panic("boom") }
	tests := []struct {
		name       string
		giveOpts   func(t *testing.T) []egress.Option
		giveStatus int
		giveHeader []string
	}{
		{
			name: "WithKey",
			giveOpts: func(t *testing.T) []egress.Option {
				return []egress.Option{
					egress.WithQueue(newQueue(t, 1, 0)),
					egress.WithKey(func(*http.Request) string { boom(); return "" }),
				}
			},
			giveStatus: http.StatusOK,
		},
		{
			name: "Observer.Refused",
			giveOpts: func(t *testing.T) []egress.Option {
				return []egress.Option{
					egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1), 1)),
					egress.WithMaxWait(0), // the second call is refused
					egress.WithObserver(&egress.Observer{Refused: func(egress.RefusalInfo) { boom() }}),
				}
			},
			giveStatus: http.StatusOK,
		},
		{
			name: "Observer.Waited",
			giveOpts: func(t *testing.T) []egress.Option {
				return []egress.Option{
					egress.WithQueue(newQueue(t, 1, 0)),
					egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1), 1)),
					egress.WithMaxWait(-1), // the second call waits
					egress.WithObserver(&egress.Observer{Waited: func(egress.WaitInfo) { boom() }}),
				}
			},
			giveStatus: http.StatusOK,
		},
		{
			name: "Observer.Sent",
			giveOpts: func(t *testing.T) []egress.Option {
				return []egress.Option{egress.WithObserver(&egress.Observer{Sent: func(egress.SentInfo) { boom() }})}
			},
			giveStatus: http.StatusOK,
		},
		{
			name: "Observer.Paused",
			giveOpts: func(t *testing.T) []egress.Option {
				return []egress.Option{
					egress.WithRetry(retryafter.Policy{Jitter: zeroJitter}),
					egress.WithObserver(&egress.Observer{Paused: func(egress.PauseInfo) { boom() }}),
				}
			},
			giveStatus: http.StatusTooManyRequests,
			giveHeader: []string{"Retry-After", "1"},
		},
		{
			name: "Observer.Retrying",
			giveOpts: func(t *testing.T) []egress.Option {
				return []egress.Option{
					egress.WithRetry(retryafter.Policy{Jitter: zeroJitter}),
					egress.WithObserver(&egress.Observer{Retrying: func(egress.RetryInfo) { boom() }}),
				}
			},
			giveStatus: http.StatusTooManyRequests, // no delay: no pause, a local backoff
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var reqBodies, respBodies []*trackedBody
				track := func(all *[]*trackedBody, b *trackedBody) *trackedBody {
					mu.Lock()
					defer mu.Unlock()
					*all = append(*all, b)
					return b
				}
				base := &fakeBase{answer: func(req *http.Request, _ int) (*http.Response, error) {
					resp := respond(req, tt.giveStatus, tt.giveHeader...)
					resp.Body = track(&respBodies, newTrackedBody("ok"))
					return resp, nil
				}}
				tr := egress.NewTransport(base, tt.giveOpts(t)...)

				panicked := 0
				for range 2 { // the first call of the cases that refuse or wait goes through
					req := newRequest(t, context.Background(), http.MethodPost, "http://api.test/", nil)
					req.Body = track(&reqBodies, newTrackedBody("payload"))
					req.GetBody = func() (io.ReadCloser, error) { return track(&reqBodies, newTrackedBody("payload")), nil }
					func() {
						defer func() {
							if recover() != nil {
								panicked++
							}
						}()
						resp, err := tr.RoundTrip(req)
						require.NoError(t, err)
						drainClose(t, resp)
					}()
					if panicked > 0 {
						break
					}
				}
				synctest.Wait()

				require.Equal(t, 1, panicked)
				for i, b := range reqBodies {
					assert.Equal(t, int32(1), b.closes.Load(), "request body %d is closed once", i)
				}
				for i, b := range respBodies {
					assert.Equal(t, int32(1), b.closes.Load(), "response body %d is closed once", i)
				}
			})
		})
	}
}

// TestPanicGivesTheEstimateBack: a panic in Observer.Waited comes after
// the attempt's estimate ([egress.WithEstimate]) was booked and before it
// was sent. Unwinding gives the units back, as when the attempt is
// stopped before it is sent: nothing reached the upstream, and no
// response will ever settle them. Before, they stayed booked for good,
// and the next call waited a whole interval for them.
func TestPanicGivesTheEstimateBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var panics atomic.Int32
		panics.Store(1)
		tr := egress.NewTransport(&fakeBase{},
			egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1), 1)),
			egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{1}, nil }),
			egress.WithMaxWait(-1),
			egress.WithObserver(&egress.Observer{Waited: func(egress.WaitInfo) {
				if panics.Add(-1) == 0 {
					panic("boom")
				}
			}}),
		)
		roundTrip := func() {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
			require.NoError(t, err)
			drainClose(t, resp)
		}
		roundTrip() // takes the burst
		assert.Panics(t, roundTrip, "waits 1 s for its slot, then Waited panics")

		start := time.Now()
		roundTrip()

		assert.Equal(t, time.Duration(0), time.Since(start), "the panicked call's unit was given back")
	})
}
