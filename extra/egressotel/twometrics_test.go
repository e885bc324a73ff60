package egressotel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressotel"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
)

func TestTwoMetricsOneProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	for i := range 2 {
		m, err := egressotel.New(mp)
		require.NoError(t, err)
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
	got := read(t, reader)
	assert.Equal(t, int64(3), got.value(t, "egress.rate_limiting.requests", egressotel.ResultAttr.String("acquired")))
	n, _ := got.count(t, "http.client.request.duration")
	assert.Equal(t, uint64(3), n)
}
