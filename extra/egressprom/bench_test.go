package egressprom_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

// BenchmarkTransportOverhead measures what the metrics add to a request,
// set up as bench/micro's benchmark of the same name: a Transport that
// never makes a call wait, over an in-memory base. The goal is that the
// Transport with metrics attached stays within 1µs and 3 allocations of
// the bare base.
func BenchmarkTransportOverhead(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, "http://api.example/v1", nil)
	if err != nil {
		b.Fatal(err)
	}
	transport := func(opts ...egress.Option) *egress.Transport {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: 1e9, Per: time.Second}, 1e6)
		if err != nil {
			b.Fatal(err)
		}
		q, err := queue.New(1<<20, 0)
		if err != nil {
			b.Fatal(err)
		}
		return egress.NewTransport(memBase{}, append([]egress.Option{egress.WithLimiter(tb), egress.WithQueue(q)}, opts...)...)
	}
	withMetrics := func() http.RoundTripper {
		m := egressprom.New()
		prometheus.NewRegistry().MustRegister(m)
		return m.Instrument(transport(egress.WithObserver(m.Observer(nil))))
	}
	// The metrics' own cost, apart from the Transport's: over a Transport
	// without limiter or queue, which hands every request straight to the
	// base, the difference is what Instrument and the Observer add.
	metricsOnly := func() http.RoundTripper {
		m := egressprom.New()
		prometheus.NewRegistry().MustRegister(m)
		return m.Instrument(egress.NewTransport(memBase{}, egress.WithObserver(m.Observer(nil))))
	}
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare-base", memBase{}},
		{"pass-through", egress.NewTransport(memBase{})},
		{"pass-through+metrics", metricsOnly()},
		{"egress", transport()},
		{"egress+egressprom", withMetrics()},
	} {
		b.Run("lib="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
			}
		})
	}
}
