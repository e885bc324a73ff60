package egressprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/throttle/redislimit"
)

// TestBucketsFitWhatTheyTime: each histogram's buckets span what it
// times. Before, every histogram had the request duration's buckets, from
// 5ms to 60s: a Redis round trip (100µs to redislimit's 250ms timeout)
// and a wait at 1 000/s (1ms) all fell into the first bucket, and a wait
// or pause of minutes into +Inf.
func TestBucketsFitWhatTheyTime(t *testing.T) {
	m := egressprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
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
		{name: "egress_queue_wait_seconds", wantFirst: 0.001, wantLastAt: 300},
		{name: "egress_limiter_wait_seconds", wantFirst: 0.001, wantLastAt: 300},
		{name: "egress_pause_duration_seconds", wantFirst: 0.001, wantLastAt: 300},
		{name: "egress_redis_round_trip_duration_seconds", wantFirst: 0.0001, wantLastAt: redislimit.DefaultTimeout.Seconds()},
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	bounds := map[string][]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, b := range s.GetHistogram().GetBucket() {
				bounds[mf.GetName()] = append(bounds[mf.GetName()], b.GetUpperBound())
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bounds[tt.name]
			require.NotEmpty(t, got)
			assert.LessOrEqual(t, got[0], tt.wantFirst)
			assert.GreaterOrEqual(t, got[len(got)-1], tt.wantLastAt)
		})
	}
}
