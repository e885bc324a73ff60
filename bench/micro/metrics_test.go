package micro

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressotel"
	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
)

// BenchmarkTransportOverheadMetrics measures what egress adds to a
// request with a metrics adapter attached, set up as
// BenchmarkTransportOverhead (the recipe's limiter, WithUpstream and a
// queue over an in-memory base), plus the adapter's Observer and
// Instrument: egressotel over the OpenTelemetry SDK with a manual reader
// that is never read (what a program exporting periodically pays per
// request), and egressprom registered with a registry that is never
// scraped. Goal (issue 17): each within the Transport's overhead goal,
// ≤ 1µs and ≤ 3 allocs over the bare base. The overhead= runs measure
// each interleaved with the bare base in the thread's CPU time
// (metrictest.Interleaved), so that a busy machine slows both alike.
func BenchmarkTransportOverheadMetrics(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, "http://api.example/v1", nil)
	if err != nil {
		b.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	otel, err := egressotel.New(mp)
	if err != nil {
		b.Fatal(err)
	}
	prom := egressprom.New()
	prometheus.NewRegistry().MustRegister(prom)
	withOTel := otel.Instrument(overheadTransport(b, memBase{}, egress.WithObserver(otel.Observer(nil))))
	withProm := prom.Instrument(overheadTransport(b, memBase{}, egress.WithObserver(prom.Observer(nil))))
	runEach(b, req, []libRT{{"bare-base", memBase{}}, {"egress+egressotel", withOTel}, {"egress+egressprom", withProm}})
	b.Run("overhead=egress+egressotel-over-bare-base", func(b *testing.B) { metrictest.Interleaved(b, req, memBase{}, withOTel) })
	b.Run("overhead=egress+egressprom-over-bare-base", func(b *testing.B) { metrictest.Interleaved(b, req, memBase{}, withProm) })
}
