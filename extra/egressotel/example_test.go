package egressotel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressotel"
	"github.com/egress-go/egress/throttle"
)

func ExampleNew() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()

	// The program's MeterProvider. Here the SDK with a manual reader, to
	// print what was recorded; real code exports through OTLP or
	// Prometheus.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	m, err := egressotel.New(mp, egressotel.WithMaxKeys(50))
	if err != nil {
		fmt.Println(err)
		return
	}
	tb, _ := throttle.NewTokenBucket(throttle.PerSecond(10), 5)
	t := egress.NewTransport(nil,
		egress.WithLimiter(tb),
		egress.WithObserver(m.Observer(nil)), // or m.Observer(yourObserver)
	)
	client := &http.Client{Transport: m.Instrument(t)}

	for range 3 {
		resp, err := client.Get(upstream.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			switch data := metric.Data.(type) {
			case metricdata.Histogram[float64]:
				if metric.Name == "http.client.request.duration" {
					fmt.Println(metric.Name, "count:", data.DataPoints[0].Count)
				}
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					if r, _ := dp.Attributes.Value(egressotel.ResultAttr); r.AsString() == "acquired" {
						fmt.Println(metric.Name, "acquired:", dp.Value)
					}
				}
			}
		}
	}
	// Output:
	// http.client.request.duration count: 3
	// egress.rate_limiting.requests acquired: 3
}
