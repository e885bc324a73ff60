package egress_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// TestRefusalElapsed checks what Observer.Refused hears of a refused
// request: the caller's request, and how long it had waited, from its
// first wait, when it was refused.
func TestRefusalElapsed(t *testing.T) {
	// refuseFrom refuses the call-th booking for key api.test and those
	// after it.
	refuseFrom := func(call int) throttle.Limiter {
		calls := 0
		return limiterFunc(func(_ context.Context, key string, _ int, _ time.Duration) (*throttle.Reservation, error) {
			if calls += btoi(key == "api.test"); calls >= call {
				return throttle.Refused(time.Minute, 0), nil
			}
			return &throttle.Reservation{OK: true}, nil
		})
	}
	slowDown := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
		return respond(req, http.StatusTooManyRequests, "Retry-After", "2"), nil
	}}
	tests := []struct {
		name        string
		giveOpts    func(q *queue.Queue) []egress.Option
		giveBase    http.RoundTripper
		giveHold    time.Duration // how long the queue's only slot is held first
		wantErr     error         // nil: the 429 comes back
		wantAttempt int
		wantElapsed time.Duration
	}{
		{
			name:        "queue full at once",
			giveOpts:    func(*queue.Queue) []egress.Option { return []egress.Option{egress.WithQueue(newQueue(t, 1, 0))} },
			giveBase:    &fakeBase{},
			giveHold:    time.Second,
			wantErr:     queue.ErrFull,
			wantAttempt: 1,
		},
		{
			name: "limit at once",
			giveOpts: func(q *queue.Queue) []egress.Option {
				return []egress.Option{egress.WithQueue(q), egress.WithLimiter(refuseFrom(1))}
			},
			giveBase:    &fakeBase{},
			wantErr:     throttle.ErrLimitExceeded,
			wantAttempt: 1,
		},
		{
			name: "limit after waiting in line",
			giveOpts: func(q *queue.Queue) []egress.Option {
				return []egress.Option{egress.WithQueue(q), egress.WithLimiter(refuseFrom(1))}
			},
			giveBase:    &fakeBase{},
			giveHold:    3 * time.Second,
			wantErr:     throttle.ErrLimitExceeded,
			wantAttempt: 1,
			wantElapsed: 3 * time.Second,
		},
		{
			name: "retry refused",
			giveOpts: func(q *queue.Queue) []egress.Option {
				return []egress.Option{egress.WithQueue(q), egress.WithLimiter(refuseFrom(2)), egress.WithRetry(retryafter.Policy{Jitter: zeroJitter})}
			},
			giveBase:    slowDown,
			wantAttempt: 2,
			wantElapsed: 2 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQueue(t, 1, 1)
				var got []egress.RefusalInfo
				opts := append(tt.giveOpts(q), egress.WithObserver(&egress.Observer{
					Refused: func(i egress.RefusalInfo) { got = append(got, i) },
				}))
				tr := egress.NewTransport(tt.giveBase, opts...)
				if tt.giveHold > 0 {
					held := hold(t, tr)
					time.AfterFunc(tt.giveHold, func() { drainClose(t, held) })
				}
				req := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)

				resp, err := tr.RoundTrip(req)

				assert.ErrorIs(t, err, tt.wantErr)
				closeIfAny(t, resp)
				time.Sleep(tt.giveHold)
				require.Len(t, got, 1)
				assert.Same(t, req, got[0].Request)
				assert.Equal(t, tt.wantAttempt, got[0].Attempt)
				assert.Equal(t, tt.wantElapsed, got[0].Elapsed)
			})
		})
	}
}

func closeIfAny(t *testing.T, resp *http.Response) {
	if resp != nil {
		drainClose(t, resp)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hold sends a request through tr whose body stays open, holding its
// queue slot.
func hold(t *testing.T, tr *egress.Transport) *http.Response {
	t.Helper()
	q := newRequest(t, egress.WithRequestKey(context.Background(), "holder"), http.MethodGet, "http://api.test/", nil)
	resp, err := tr.RoundTrip(q)
	require.NoError(t, err)
	return resp
}
