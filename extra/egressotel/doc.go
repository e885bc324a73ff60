// Package egressotel exports what an [egress.Transport] does as
// OpenTelemetry metrics, through the metric API only: it never imports
// the SDK, so a program chooses its own MeterProvider and exporter.
//
// It emits the stable HTTP client instrument http.client.request.duration
// and, since there is no client-side rate-limiting convention yet,
// limiter instruments named after ASP.NET Core's server-side
// aspnetcore.rate_limiting.* ones: see [Metrics] for the list.
//
// It lives in its own module, so that the egress module does not depend
// on OpenTelemetry. Wire it in two steps:
//
//	m, err := egressotel.New(meterProvider)
//	t := egress.NewTransport(nil, egress.WithLimiter(l), egress.WithObserver(m.Observer(nil)))
//	client := &http.Client{Transport: m.Instrument(t)}
//
// [Metrics.Observer] takes the Observer it should pass every event on
// to, so that metrics compose with a program's own Observer or with
// [egress.NewSlogObserver]: m.Observer(egress.NewSlogObserver(logger)).
//
// Keys are attribute values only within bounds: the keys named by
// [WithKeys], or the first [WithMaxKeys] keys seen ([DefaultMaxKeys] by
// default). Every other key, and every server address past the same cap,
// is recorded as [Other], so that a flood of keys cannot grow the series
// without bound.
package egressotel
