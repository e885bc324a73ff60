package egressotel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressotel"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// TestLearnedRate sends requests through an Adaptive limiter to an
// upstream that throttles one key, and reads the rate it learned.
func TestLearnedRate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/throttled" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	a, err := throttle.NewAdaptive(throttle.PerSecond(1000))
	require.NoError(t, err)
	m, reader := newMetrics(t, egressotel.WithLearnedRate(a), egressotel.WithMaxKeys(2))
	tr := egress.NewTransport(nil, egress.WithLimiter(a), egress.WithObserver(m.Observer(nil)))
	client := &http.Client{Transport: m.Instrument(tr)}
	defer client.CloseIdleConnections()
	for _, c := range []struct{ key, path string }{{"calm", "/"}, {"throttled", "/throttled"}, {"third", "/"}} {
		req, err := http.NewRequestWithContext(egress.WithRequestKey(context.Background(), c.key), http.MethodGet, srv.URL+c.path, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}

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
// client has the hook, and counts the round trips recorded against a
// hook of the test's own.
func TestRedisRoundTrips(t *testing.T) {
	srv := upstream(t)
	m, reader := newMetrics(t)
	rdb := redis.NewClient(metrictest.StartRedis(t))
	defer rdb.Close()
	var trips metrictest.Counting
	rdb.AddHook(m.RedisHook())
	rdb.AddHook(&trips)
	limiter, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(1000), 100, redislimit.WithObserver(m.RedisObserver(nil)))
	require.NoError(t, err)
	defer limiter.Close()
	client := &http.Client{Transport: m.Instrument(egress.NewTransport(nil, egress.WithLimiter(limiter), egress.WithObserver(m.Observer(nil))))}
	defer client.CloseIdleConnections()
	for range 5 {
		resp, err := client.Get(srv.URL + "/ok")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}

	got := read(t, reader)
	n, sum := got.count(t, "egress.redis.round_trip.duration")
	assert.GreaterOrEqual(t, n, uint64(5), "one script call per request at least")
	assert.Equal(t, uint64(trips.N.Load()), n, "every round trip the client made")
	assert.Greater(t, sum, 0.0)
	for _, dp := range got["egress.redis.round_trip.duration"].(metricdata.Histogram[float64]).DataPoints {
		assert.Zero(t, dp.Attributes.Len(), "no round trip failed")
	}

	// A client whose server is gone: its round trip fails.
	gone := redis.NewClient(&redis.Options{Network: "unix", Addr: t.TempDir() + "/none.sock", MaxRetries: -1})
	defer gone.Close()
	gone.AddHook(m.RedisHook())
	require.Error(t, gone.Ping(context.Background()).Err())
	failed, _ := read(t, reader).count(t, "egress.redis.round_trip.duration", attribute.String("error.type", "_OTHER"))
	assert.Equal(t, uint64(1), failed)
}
