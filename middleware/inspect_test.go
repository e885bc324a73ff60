package middleware_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/throttle"
)

// FixedWindow is a throttle.FixedWindow that reports a canned remaining
// through throttle.Inspector. Its name tells Describe its kind, as for
// redislimit's.
type FixedWindow struct {
	*throttle.FixedWindow
	left int
}

func (w FixedWindow) Inspect(_ context.Context, key string) (throttle.KeyState, error) {
	return throttle.KeyState{Key: key, Remaining: w.left}, nil
}

// SlidingWindow is a throttle.SlidingWindow that cannot be inspected,
// whatever throttle's own type can do. Its name tells Describe its kind.
type SlidingWindow struct{ w *throttle.SlidingWindow }

func (w SlidingWindow) Limit() int            { return w.w.Limit() }
func (w SlidingWindow) Window() time.Duration { return w.w.Window() }
func (w SlidingWindow) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	return w.w.Reserve(ctx, key, n, maxWait)
}

// bucket is the same for a token bucket.
type bucket struct {
	*throttle.TokenBucket
	left int
}

func (b bucket) Inspect(_ context.Context, key string) (throttle.KeyState, error) {
	return throttle.KeyState{Key: key, Remaining: b.left}, nil
}

// TestExhaustedPartsAreInspected checks that when one of several limits is
// spent, the others are stated as they are: a spent burst must not claim a
// spent day, or a client would pause until midnight.
func TestExhaustedPartsAreInspected(t *testing.T) {
	tests := []struct {
		name      string
		giveParts func() []throttle.Limiter
		wantField string
	}{
		{
			name: "both inspectable",
			giveParts: func() []throttle.Limiter {
				return []throttle.Limiter{
					bucket{must(throttle.NewTokenBucket(throttle.PerSecond(2), 2)), 0},
					FixedWindow{must(throttle.NewFixedWindow(1000, 24*time.Hour)), 998},
				}
			},
			wantField: `"bucket";r=0;t=1, "fixed";r=998;t=86400`,
		},
		{
			name: "the day cannot say: stated spent, which is never untrue",
			giveParts: func() []throttle.Limiter {
				return []throttle.Limiter{
					bucket{must(throttle.NewTokenBucket(throttle.PerSecond(2), 2)), 0},
					SlidingWindow{must(throttle.NewSlidingWindow(1000, 24*time.Hour))},
				}
			},
			wantField: `"bucket";r=0;t=1, "sliding";r=0;t=86400`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := tt.giveParts()
			p := middleware.Describe(parts...)
			h := middleware.New(throttle.All(parts...),
				middleware.WithPolicies(func(string) *middleware.Policies { return p }),
				middleware.WithClock(func() time.Time { return time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) }),
			).Wrap(okHandler)
			require.Equal(t, http.StatusOK, get(h, "203.0.113.7:1").StatusCode)
			resp := get(h, "203.0.113.7:1")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tt.wantField, resp.Header.Get("RateLimit"))
		})
	}
}
