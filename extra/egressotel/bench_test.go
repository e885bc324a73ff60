package egressotel_test

import (
	"context"
	"net/http"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressotel"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
)

// BenchmarkTransportOverhead measures what the metrics add to a request
// (see metrictest.BenchmarkOverhead), over the SDK with a manual reader
// that is never read: what a program exporting periodically pays per
// request.
func BenchmarkTransportOverhead(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	metrictest.BenchmarkOverhead(b, "egressotel", func(newTransport func(...egress.Option) *egress.Transport) http.RoundTripper {
		m, err := egressotel.New(mp)
		if err != nil {
			b.Fatal(err)
		}
		return m.Instrument(newTransport(egress.WithObserver(m.Observer(nil))))
	})
}
