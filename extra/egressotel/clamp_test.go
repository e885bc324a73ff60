package egressotel_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressotel"
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
	m, reader := newMetrics(t)
	var passed int
	tr := egress.NewTransport(metrictest.LimitZeroBase{}, egress.WithRetry(retryafter.Policy{}), egress.WithUpstream(u),
		egress.WithObserver(m.Observer(&egress.Observer{Clamped: func(egress.ClampInfo) { passed++ }})))
	req, err := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	require.NoError(t, err)
	resp, err := m.Instrument(tr).RoundTrip(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	assert.Equal(t, 1, passed, "the event is passed on")
	got := read(t, reader)
	assert.Equal(t, int64(1), got.value(t, "egress.rate_limiting.quota.clamps", egressotel.KeyAttr.String("api.test"), egressotel.FieldAttr.String("Limit")))
}
