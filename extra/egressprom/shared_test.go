package egressprom_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
)

// TestOneMetricsManyTransports: one Metrics on a registry reports the sum
// of every Transport it instruments, and a second Metrics on the same
// registry is refused as a duplicate, as the doc of Metrics says.
func TestOneMetricsManyTransports(t *testing.T) {
	m := egressprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	for i := range 2 {
		tr := egress.NewTransport(metrictest.MemBase{}, egress.WithObserver(m.Observer(nil)))
		rt := m.Instrument(tr)
		for range i + 1 {
			req, err := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			require.NoError(t, err)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
		}
	}
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP egress_requests_total Attempts acquired (sent) and requests refused, timed out or canceled, by result.
# TYPE egress_requests_total counter
egress_requests_total{result="acquired"} 3
egress_requests_total{result="canceled"} 0
egress_requests_total{result="limiter_error"} 0
egress_requests_total{result="refused_full"} 0
egress_requests_total{result="refused_limit"} 0
egress_requests_total{result="timeout"} 0
`), "egress_requests_total"))

	var dup prometheus.AlreadyRegisteredError
	assert.True(t, errors.As(reg.Register(egressprom.New()), &dup), "a second Metrics on one registry")
}
