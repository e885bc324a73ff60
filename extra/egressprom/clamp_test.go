package egressprom_test

import (
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
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// TestClampedQuotaIsCounted: a quota statement with absurd values, which
// the Transport clamps and reports to its Observer's Clamped func, is
// counted by key and field. Before, Metrics left Clamped unrecorded.
func TestClampedQuotaIsCounted(t *testing.T) {
	u, err := throttle.NewUpstream()
	require.NoError(t, err)
	m := egressprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	var passed int
	tr := egress.NewTransport(metrictest.LimitZeroBase{}, egress.WithRetry(retryafter.Policy{}), egress.WithUpstream(u),
		egress.WithObserver(m.Observer(&egress.Observer{Clamped: func(egress.ClampInfo) { passed++ }})))
	req, err := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	require.NoError(t, err)
	resp, err := m.Instrument(tr).RoundTrip(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	assert.Equal(t, 1, passed, "the event is passed on")
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP egress_quota_clamps_total Fields of upstream quota statements clamped for absurd values before booking, by key and field.
# TYPE egress_quota_clamps_total counter
egress_quota_clamps_total{field="Limit",key="api.test"} 1
`), "egress_quota_clamps_total"))
}
