package egressotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle/redislimit"
)

// TestBucketsFitWhatTheyTime: each histogram's buckets span what it
// times. Before, every histogram had the request duration's buckets, from
// 5ms to 60s: a Redis round trip (100µs to redislimit's 250ms timeout)
// and a wait at 1 000/s (1ms) all fell into the first bucket, and a wait
// or pause of minutes into +Inf.
func TestBucketsFitWhatTheyTime(t *testing.T) {
	m, reader := newMetrics(t)
	o := m.Observer(nil)
	o.Waited(egress.WaitInfo{Key: "k", Attempt: 1, Queue: time.Millisecond, Limiter: time.Millisecond})
	o.Paused(egress.PauseInfo{Key: "k", StatusCode: 429, Duration: time.Second})
	ctx := context.Background()
	require.NoError(t, m.RedisHook().ProcessHook(func(context.Context, redis.Cmder) error { return nil })(ctx, redis.NewCmd(ctx, "ping")))

	tests := []struct {
		name       string
		wantFirst  float64 // the first bucket's upper bound is at most this
		wantLastAt float64 // the last finite bound is at least this
	}{
		{name: "egress.rate_limiting.request.time_in_queue", wantFirst: 0.001, wantLastAt: 300},
		{name: "egress.rate_limiting.request.time_in_limiter", wantFirst: 0.001, wantLastAt: 300},
		{name: "egress.rate_limiting.pause.duration", wantFirst: 0.001, wantLastAt: 300},
		{name: "egress.redis.round_trip.duration", wantFirst: 0.0001, wantLastAt: redislimit.DefaultTimeout.Seconds()},
	}
	got := read(t, reader)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := got[tt.name].(metricdata.Histogram[float64])
			require.True(t, ok, "%s is a float64 histogram", tt.name)
			require.NotEmpty(t, h.DataPoints)
			b := h.DataPoints[0].Bounds
			require.NotEmpty(t, b)
			assert.LessOrEqual(t, b[0], tt.wantFirst)
			assert.GreaterOrEqual(t, b[len(b)-1], tt.wantLastAt)
		})
	}
}
