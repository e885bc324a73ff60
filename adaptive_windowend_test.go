package egress_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// TestAdaptiveHoldsToTheWindowsEnd: the adaptive recipe against egress's
// middleware over fixed windows, which state their reset cut to whole
// seconds (IETF t, or an epoch second). Paced at 97% of 10 a second, the
// last unit of each window left at 0.93 s into it, and its answer, "r=0;
// t=1", held the key to 1.93 s: most of a second lost in every two, 52–57%
// of the least used. The record beside the rate knows where the window
// ends (72 ms on); held to it: 84%. A fixed window of 20 per 5 s, 81–83% →
// 90%. What is left of the least is the even pace (a greedy client sends
// each window's units at its start).
func TestAdaptiveHoldsToTheWindowsEnd(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		window time.Duration
		giveMW []middleware.Option
		want   float64 // of the least
	}{
		{"10 a second, IETF fields", 10, time.Second, nil, 0.8},
		{"10 a second, X-RateLimit epochs", 10, time.Second, []middleware.Option{middleware.WithXRateLimit(middleware.ResetEpoch)}, 0.8},
		{"20 per 5 s, IETF fields", 20, 5 * time.Second, nil, 0.85},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				window, err := throttle.NewFixedWindow(tt.limit, tt.window)
				require.NoError(t, err)
				learned, err := throttle.NewAdaptive(throttle.PerSecond(1000))
				require.NoError(t, err)
				n := 6*tt.limit + tt.limit/2
				took, failed, refused := againstMiddleware(t, middleware.New(window, tt.giveMW...), n,
					egress.WithLimiter(learned), egress.WithRetry(retryafter.Policy{}))
				least := 6 * tt.window // the last half window's units go at its start
				t.Logf("%v for %d requests (the least %v: %.0f%% used), %d failed, %d refused", took, n, least, 100*least.Seconds()/took.Seconds(), failed, refused)
				assert.Zero(t, failed, "requests failed")
				assert.LessOrEqual(t, refused, int64(n/100), "refused")
				assert.GreaterOrEqual(t, least.Seconds()/took.Seconds(), tt.want, "utilization")
			})
		})
	}
}
