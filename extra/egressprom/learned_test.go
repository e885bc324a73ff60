package egressprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
	"github.com/egress-go/egress/throttle"
)

// TestLearnedRate sends requests through an Adaptive limiter to an
// upstream that throttles one key, and scrapes the rate it learned.
func TestLearnedRate(t *testing.T) {
	a, err := throttle.NewAdaptive(throttle.PerSecond(1000))
	require.NoError(t, err)
	m := egressprom.New(egressprom.WithLearnedRate(a), egressprom.WithMaxKeys(2))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	metrictest.LearnRates(t, a, attachTo(m))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "egress_learned_rate" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
		}
	}
	assert.Equal(t, map[string]float64{"calm": a.Rate("calm"), "throttled": a.Rate("throttled")}, got,
		"one series per key within the cap of 2, none for the third")
	assert.Equal(t, 1000.0, got["calm"])
	assert.Less(t, got["throttled"], 1000.0, "a 429 cut the rate")
}

// TestRedisRoundTrips sends requests through a Redis token bucket whose
// client has the hook, and compares the round trips scraped with those a
// hook of the test's own counted.
func TestRedisRoundTrips(t *testing.T) {
	m := egressprom.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	trips := metrictest.RedisRoundTrips(t, 5, m.RedisHook(), m.RedisObserver(nil), attachTo(m))

	n, sum := histogram(t, reg, "egress_redis_round_trip_duration_seconds", map[string]string{"error_type": ""})
	assert.GreaterOrEqual(t, n, uint64(5), "one script call per request at least")
	assert.Equal(t, uint64(trips), n, "every round trip the client made")
	assert.Greater(t, sum, 0.0)

	metrictest.FailRoundTrip(t, m.RedisHook())
	failed, _ := histogram(t, reg, "egress_redis_round_trip_duration_seconds", map[string]string{"error_type": "_OTHER"})
	assert.Equal(t, uint64(1), failed)
}
