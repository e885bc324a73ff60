package egressprom

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/metriclabel"
)

// DefaultMaxKeys is how many distinct keys, and how many distinct hosts,
// get a label value of their own unless [WithMaxKeys] or [WithKeys] says
// otherwise.
const DefaultMaxKeys = 100

// durationBuckets are the buckets of every _seconds histogram: those that
// OpenTelemetry advises for http.client.request.duration, stretched to a
// minute, since a request may wait that long for its slot.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60}

// An Option configures [New].
type Option interface {
	apply(*config)
}

type config struct {
	keys    []string // allow-list; nil means "first maxKeys seen"
	maxKeys int
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithKeys makes exactly keys labels of their own; every other key is
// counted under [Other]. Hosts stay bounded by [WithMaxKeys].
func WithKeys(keys ...string) Option {
	keys = append([]string{}, keys...)
	return optionFunc(func(c *config) { c.keys = keys })
}

// WithMaxKeys gives the first n distinct keys seen a label of their own,
// and counts later ones under [Other]; the same cap bounds the host label.
// 0 counts every key under Other. WithMaxKeys panics if n is negative.
func WithMaxKeys(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("egressprom: WithMaxKeys given a negative n: %d", n))
	}
	return optionFunc(func(c *config) { c.maxKeys = n })
}

// Metrics is a [prometheus.Collector] of what the Transports it watches
// do. Register it once, install [Metrics.Observer] on each Transport and
// send requests through [Metrics.Instrument]. It collects:
//
//	egress_request_duration_seconds{method,host,code,error_type,resend_count}  histogram: each attempt sent, from the base RoundTripper's call to its response or error (a retry is an attempt of its own), and each request refused unsent
//	egress_requests_total{result}                                 counter: attempts acquired (sent), and requests refused_full, refused_limit, timeout, canceled, or failed on a limiter_error
//	egress_queue_wait_seconds{key}                                histogram: time in line for a queue slot, of requests that waited
//	egress_limiter_wait_seconds{key}                              histogram: time waited for a slot in the key's budget, of attempts that waited
//	egress_refusals_total{key,reason}                             counter: refusals by key; reason is queue_full, limit_exceeded, timeout or limiter_error
//	egress_retries_total{key,code}                                counter: responses discarded to try again
//	egress_pause_duration_seconds{key}                            histogram: pauses of a key asked for by the upstream (count and seconds)
//	egress_pause_failures_total{key}                              counter: pauses the limiter failed to record
//	egress_queue_waiting_requests                                 gauge: requests in line for a queue slot
//	egress_in_flight_requests                                     gauge: queue slots held
//	egress_redis_errors_total, egress_redis_recoveries_total      counters: failed calls to Redis, and recoveries
//	egress_redis_breaker_open                                     gauge: 1 while Redis is failing (the circuit breaker is open), else 0
//
// egress_request_duration_seconds is observed by [Metrics.Observer] for
// each attempt on the wire (its Sent func), with resend_count =
// attempt-1 on a retry (empty on a first attempt), as OpenTelemetry's
// http.request.resend_count; and by [Metrics.Instrument] for each request
// the Transport refused to send, from RoundTrip to the refusal. A request
// whose context ended while it waited, before any attempt was sent, is
// counted in egress_requests_total only.
//
// The key and host labels are bounded as the package doc says. In
// egress_requests_total, "canceled" and "timeout" count requests whose
// context ended before a response came, whether they were waiting or on
// the wire, so a request sent and then cancelled counts as acquired too.
// Redis round trips are not seen by egress: count them on the go-redis
// client (go-redis's extra/redisprometheus).
//
// Metrics is safe for concurrent use.
type Metrics struct {
	keys, hosts *metriclabel.Bounded

	duration      *prometheus.HistogramVec
	queueWait     *prometheus.HistogramVec
	limiterWait   *prometheus.HistogramVec
	refusals      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	pauses        *prometheus.HistogramVec
	pauseFailures *prometheus.CounterVec
	redisErrors   prometheus.Counter
	redisRecover  prometheus.Counter
	redisOpen     prometheus.Gauge

	requestsDesc, waitingDesc, inFlightDesc *prometheus.Desc
	// Results that the Transport's Stats do not count.
	refusedFull, refusedLimit, timeouts, canceled, limiterErrors atomic.Uint64

	// mu guards transports and series.
	mu         sync.RWMutex
	transports []*egress.Transport
	series     map[seriesKey]prometheus.Observer
}

// seriesKey names one series of egress_request_duration_seconds by its
// label values.
type seriesKey struct {
	method, host string
	code         int // 0 when no response came
	errorType    string
	resend       int // attempt-1
}

var _ prometheus.Collector = (*Metrics)(nil)

// New returns Metrics configured by opts. Register it with a
// [prometheus.Registerer]. It panics if an option is nil.
func New(opts ...Option) *Metrics {
	c := config{maxKeys: DefaultMaxKeys}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("egressprom: New given a nil Option at index %d", i))
		}
		o.apply(&c)
	}
	hist := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: durationBuckets}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	return &Metrics{
		keys:  metriclabel.New(c.keys, c.maxKeys),
		hosts: metriclabel.New(nil, c.maxKeys),

		duration:      hist("egress_request_duration_seconds", "Duration of each attempt an egress Transport sent, from the base RoundTripper's call to its response or error, and of each request it refused to send.", "method", "host", "code", "error_type", "resend_count"),
		queueWait:     hist("egress_queue_wait_seconds", "Time requests waited in line for a queue slot, of those that waited.", "key"),
		limiterWait:   hist("egress_limiter_wait_seconds", "Time attempts waited for their slot in the key's budget, of those that waited.", "key"),
		refusals:      counter("egress_refusals_total", "Requests the Transport refused to send, by key and reason.", "key", "reason"),
		retries:       counter("egress_retries_total", "Responses discarded to try the request again, by key and status code.", "key", "code"),
		pauses:        hist("egress_pause_duration_seconds", "Pauses of a key asked for by the upstream, and how long each lasts.", "key"),
		pauseFailures: counter("egress_pause_failures_total", "Pauses the limiter failed to record.", "key"),
		redisErrors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "egress_redis_errors_total", Help: "Calls to Redis that failed."}),
		redisRecover:  prometheus.NewCounter(prometheus.CounterOpts{Name: "egress_redis_recoveries_total", Help: "Times Redis answered again after failing."}),
		redisOpen:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "egress_redis_breaker_open", Help: "1 while calls to Redis are failing and the circuit breaker is open, else 0."}),

		requestsDesc: prometheus.NewDesc("egress_requests_total", "Attempts acquired (sent) and requests refused, timed out or canceled, by result.", []string{"result"}, nil),
		waitingDesc:  prometheus.NewDesc("egress_queue_waiting_requests", "Requests waiting in line for a queue slot.", nil, nil),
		inFlightDesc: prometheus.NewDesc("egress_in_flight_requests", "Queue slots held: requests in RoundTrip or whose response body is open.", nil, nil),

		series: make(map[seriesKey]prometheus.Observer),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.duration, m.queueWait, m.limiterWait, m.refusals, m.retries, m.pauses, m.pauseFailures, m.redisErrors, m.redisRecover, m.redisOpen}
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.requestsDesc
	ch <- m.waitingDesc
	ch <- m.inFlightDesc
}

// Collect implements [prometheus.Collector]. It reads the Stats of every
// Transport given to [Metrics.Instrument].
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	var sent uint64
	var waiting, inFlight int
	m.mu.RLock()
	for _, t := range m.transports {
		s := t.Stats()
		sent += s.Sent
		waiting += s.Waiting
		inFlight += s.InFlight
	}
	m.mu.RUnlock()
	for _, r := range []struct {
		result string
		n      uint64
	}{
		{"acquired", sent},
		{"refused_full", m.refusedFull.Load()},
		{"refused_limit", m.refusedLimit.Load()},
		{"timeout", m.timeouts.Load()},
		{"canceled", m.canceled.Load()},
		{"limiter_error", m.limiterErrors.Load()},
	} {
		ch <- prometheus.MustNewConstMetric(m.requestsDesc, prometheus.CounterValue, float64(r.n), r.result)
	}
	ch <- prometheus.MustNewConstMetric(m.waitingDesc, prometheus.GaugeValue, float64(waiting))
	ch <- prometheus.MustNewConstMetric(m.inFlightDesc, prometheus.GaugeValue, float64(inFlight))
}

// Instrument returns an [http.RoundTripper] that sends requests through t
// and measures each one it refuses, and makes m report t's queue (its Stats) and
// attempts. Send every request through the returned RoundTripper; install
// [Metrics.Observer] on t for waits, refusals, retries and pauses.
// Instrument panics if t is nil.
func (m *Metrics) Instrument(t *egress.Transport) http.RoundTripper {
	if t == nil {
		panic("egressprom: Instrument given a nil *egress.Transport")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	known := false
	for _, seen := range m.transports {
		known = known || seen == t
	}
	if !known {
		m.transports = append(m.transports, t)
	}
	return &instrumented{m: m, t: t}
}

// instrumented is the RoundTripper that Instrument returns.
type instrumented struct {
	m *Metrics
	t *egress.Transport
}

// RoundTrip implements [http.RoundTripper]: it sends req through the
// Transport and, when the Transport refused to send it, records how long
// that took. The attempts sent are recorded by [Metrics.Observer].
func (it *instrumented) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := it.t.RoundTrip(req)
	if err == nil {
		return resp, nil
	}
	if !metriclabel.Refusal(err) {
		it.m.ended(req, err)
		return resp, err
	}
	elapsed := time.Since(start)
	k := seriesKey{method: metriclabel.Method(req.Method), errorType: metriclabel.ErrorType(err)}
	if req.URL != nil {
		k.host = req.URL.Host
	}
	it.m.durationSeries(k).Observe(elapsed.Seconds())
	return resp, err
}

// sent records one attempt on the wire.
func (m *Metrics) sent(s egress.SentInfo) {
	k := seriesKey{code: s.StatusCode, resend: max(s.Attempt-1, 0)}
	if req := s.Request; req != nil {
		k.method = metriclabel.Method(req.Method)
		if req.URL != nil {
			k.host = req.URL.Host
		}
	}
	if s.Err != nil {
		k.errorType = metriclabel.ErrorType(s.Err)
	}
	m.durationSeries(k).Observe(s.Duration.Seconds())
}

// CloseIdleConnections closes the Transport's idle connections.
func (it *instrumented) CloseIdleConnections() { it.t.CloseIdleConnections() }

// durationSeries returns the series of egress_request_duration_seconds for
// k, whose host is not yet a label value. Every series is looked up once
// and kept, so that a request allocates nothing here: the goal of ≤ 3
// allocations of overhead per request holds with metrics attached.
func (m *Metrics) durationSeries(k seriesKey) prometheus.Observer {
	// A host with a value of its own is its own label: one lookup.
	m.mu.RLock()
	o, ok := m.series[k]
	m.mu.RUnlock()
	if ok {
		return o
	}
	k.host = m.hosts.Label(k.host)
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.series[k]; ok {
		return o
	}
	code := ""
	if k.code != 0 {
		code = strconv.Itoa(k.code)
	}
	resend := ""
	if k.resend > 0 {
		resend = strconv.Itoa(k.resend)
	}
	o = m.duration.WithLabelValues(k.method, k.host, code, k.errorType, resend)
	m.series[k] = o
	return o
}
