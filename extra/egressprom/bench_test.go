package egressprom_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
)

// BenchmarkTransportOverhead measures what the metrics add to a request
// (see metrictest.BenchmarkOverhead), registered with a registry that is
// never scraped.
func BenchmarkTransportOverhead(b *testing.B) {
	metrictest.BenchmarkOverhead(b, "egressprom", func(newTransport func(...egress.Option) *egress.Transport) http.RoundTripper {
		m := egressprom.New()
		prometheus.NewRegistry().MustRegister(m)
		return m.Instrument(newTransport(egress.WithObserver(m.Observer(nil))))
	})
}
