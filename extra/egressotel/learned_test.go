package egressotel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/egress-go/egress/extra/egressotel"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
	"github.com/egress-go/egress/throttle"
)

// TestLearnedRate sends requests through an Adaptive limiter to an
// upstream that throttles one key, and reads the rate it learned.
func TestLearnedRate(t *testing.T) {
	a, err := throttle.NewAdaptive(throttle.PerSecond(1000))
	require.NoError(t, err)
	m, reader := newMetrics(t, egressotel.WithLearnedRate(a), egressotel.WithMaxKeys(2))
	metrictest.LearnRates(t, a, attachTo(m))

	gauge, ok := read(t, reader)["egress.rate_limiting.learned_rate"].(metricdata.Gauge[float64])
	require.True(t, ok, "learned_rate is a float64 gauge")
	got := map[string]float64{}
	for _, dp := range gauge.DataPoints {
		key, _ := dp.Attributes.Value(egressotel.KeyAttr)
		got[key.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]float64{"calm": a.Rate("calm"), "throttled": a.Rate("throttled")}, got,
		"one series per key within the cap of 2, none for the third")
	assert.Equal(t, 1000.0, got["calm"])
	assert.Less(t, got["throttled"], 1000.0, "a 429 cut the rate")
}

// TestRedisRoundTrips sends requests through a Redis token bucket whose
// client has the hook, and compares the round trips recorded with those
// a hook of the test's own counted.
func TestRedisRoundTrips(t *testing.T) {
	m, reader := newMetrics(t)
	trips := metrictest.RedisRoundTrips(t, 5, m.RedisHook(), m.RedisObserver(nil), attachTo(m))

	got := read(t, reader)
	n, sum := got.count(t, "egress.redis.round_trip.duration")
	assert.GreaterOrEqual(t, n, uint64(5), "one script call per request at least")
	assert.Equal(t, uint64(trips), n, "every round trip the client made")
	assert.Greater(t, sum, 0.0)
	for _, dp := range got["egress.redis.round_trip.duration"].(metricdata.Histogram[float64]).DataPoints {
		assert.Zero(t, dp.Attributes.Len(), "no round trip failed")
	}

	metrictest.FailRoundTrip(t, m.RedisHook())
	failed, _ := read(t, reader).count(t, "egress.redis.round_trip.duration", attribute.String("error.type", "_OTHER"))
	assert.Equal(t, uint64(1), failed)
}
