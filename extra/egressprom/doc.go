// Package egressprom exports what an [egress.Transport] does as Prometheus
// metrics, with client_golang collectors: how long requests take, how
// long they wait in the queue and for their slot in the budget, how many
// are refused and why, retries, pauses, quota statements clamped for
// absurd values, the queue's depth, and the health of Redis behind a
// redislimit budget.
//
// It lives in its own module, so that the egress module does not depend
// on client_golang. Wire it in three steps:
//
//	m := egressprom.New()
//	prometheus.MustRegister(m)
//	t := egress.NewTransport(nil, egress.WithLimiter(l), egress.WithObserver(m.Observer(nil)))
//	client := &http.Client{Transport: m.Instrument(t)}
//
// [Metrics.Observer] takes the Observer it should pass every event on
// to, so that metrics compose with a program's own Observer or with
// [egress.NewSlogObserver]: m.Observer(egress.NewSlogObserver(logger)).
//
// Keys are labels only within bounds: the keys named by [WithKeys], or the
// first [WithMaxKeys] keys seen ([DefaultMaxKeys] by default). Every
// other key, and every host past the same cap, is counted under the label
// value [Other], so that a flood of keys cannot grow the series without
// bound.
//
// Metric names follow Prometheus conventions: one egress_ prefix, base
// units (_seconds), counters ending in _total. See [Metrics] for the list.
package egressprom
