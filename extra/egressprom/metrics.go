package egressprom

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/metriclabel"
)

// DefaultMaxKeys is how many distinct keys, and how many distinct hosts,
// get a label value of their own unless [WithMaxKeys] or [WithKeys] says
// otherwise.
const DefaultMaxKeys = metriclabel.DefaultMaxKeys

// An Option configures [New].
type Option interface {
	apply(*metriclabel.Config)
}

type option metriclabel.Option

func (o option) apply(c *metriclabel.Config) { o(c) }

// WithKeys makes exactly keys labels of their own; every other key is
// counted under [Other]. Hosts stay bounded by [WithMaxKeys].
func WithKeys(keys ...string) Option { return option(metriclabel.WithKeys(keys)) }

// WithMaxKeys gives the first n distinct keys seen a label of their own,
// and counts later ones under [Other]; the same cap bounds the host label.
// 0 counts every key under Other. WithMaxKeys panics if n is negative.
func WithMaxKeys(n int) Option { return option(metriclabel.WithMaxKeys("egressprom", n)) }

// WithLearnedRate reports the rate r learned for each key with a label of
// its own (see [WithKeys], [WithMaxKeys]) as egress_learned_rate. r is a
// [github.com/egress-go/egress/throttle.Adaptive], or any limiter with its
// Rate method. Keys past the cap are not reported: their rates do not add
// up. WithLearnedRate panics if r is nil.
func WithLearnedRate(r interface{ Rate(key string) float64 }) Option {
	return option(metriclabel.WithLearnedRate("egressprom", r))
}

// Metrics is a [prometheus.Collector] of what the Transports it watches
// do. Register it once, install [Metrics.Observer] on each Transport and
// send requests through [Metrics.Instrument]: one Metrics sums every
// Transport it watches. A registry holds one Metrics: a second one has
// the same metric names, so Register returns a
// [prometheus.AlreadyRegisteredError] and MustRegister panics; give it a
// registry of its own, or a constant label with
// [prometheus.WrapRegistererWith]. It collects:
//
//	egress_request_duration_seconds{method,host,code,error_type,resend_count}  histogram: each attempt sent, from the base RoundTripper's call to its response or error (a retry is an attempt of its own), and each request refused unsent
//	egress_requests_total{result}                                 counter: attempts acquired (sent), and requests refused_full, refused_limit, timeout, canceled, or failed on a limiter_error
//	egress_queue_wait_seconds{key}                                histogram: time in line for a queue slot, of requests that waited
//	egress_limiter_wait_seconds{key}                              histogram: time waited for a slot in the key's budget, of attempts that waited
//	egress_refusals_total{key,reason}                             counter: refusals by key; reason is queue_full, limit_exceeded, timeout or limiter_error
//	egress_retries_total{key,code}                                counter: responses discarded to try again
//	egress_pause_duration_seconds{key}                            histogram: pauses of a key asked for by the upstream (count and seconds)
//	egress_pause_failures_total{key}                              counter: pauses the limiter failed to record
//	egress_quota_clamps_total{key,field}                          counter: fields of upstream quota statements clamped for absurd values; field is Limit, Remaining, Reset or Window
//	egress_queue_waiting_requests                                 gauge: requests in line for a queue slot
//	egress_in_flight_requests                                     gauge: queue slots held
//	egress_redis_errors_total, egress_redis_recoveries_total      counters: failed calls to Redis, and recoveries
//	egress_redis_breaker_open                                     gauge: 1 while Redis is failing (a circuit breaker is open: on a cluster, any node's), else 0
//	egress_redis_settles_dropped_total                            counter: settles (units given back or charged once a request's cost is known) dropped unsent
//	egress_redis_round_trip_duration_seconds{error_type}          histogram, with [Metrics.RedisHook]: each round trip to Redis (its count is the round trips); error_type when it failed
//	egress_learned_rate{key}                                      gauge, with [WithLearnedRate]: the rate learned for each key with a label of its own, in units per second
//
// egress_request_duration_seconds is observed by [Metrics.Observer] for
// each attempt on the wire (its Sent func), with resend_count =
// attempt-1 on a retry (empty on a first attempt), as OpenTelemetry's
// http.request.resend_count; and for each request the Transport refused
// to send (its Refused func), for the time from the request's first wait
// to the refusal ([egress.RefusalInfo] Elapsed: 0 for a request refused
// before it waited). A request whose context ended while it waited,
// before any attempt was sent, is counted in egress_requests_total only.
//
// The key and host labels are bounded as the package doc says. In
// egress_requests_total, "canceled" and "timeout" count requests whose
// context ended before a response came, whether they were waiting or on
// the wire, so a request sent and then cancelled counts as acquired too.
//
// Metrics is safe for concurrent use. The zero Metrics is not: make one
// with [New].
type Metrics struct {
	core  *metriclabel.Core
	rater metriclabel.Rater // nil without WithLearnedRate

	duration      *prometheus.HistogramVec
	queueWait     *prometheus.HistogramVec
	limiterWait   *prometheus.HistogramVec
	refusals      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	pauses        *prometheus.HistogramVec
	pauseFailures *prometheus.CounterVec
	clamps        *prometheus.CounterVec
	redisErrors   prometheus.Counter
	redisRecover  prometheus.Counter
	redisDropped  prometheus.Counter
	redisTrips    *prometheus.HistogramVec

	requestsDesc, waitingDesc, inFlightDesc, learnedDesc, redisOpenDesc *prometheus.Desc

	// The series of egress_request_duration_seconds, looked up once: a
	// request then allocates nothing here (goal: ≤ 1µs and ≤ 3 allocs
	// overhead per request with metrics attached).
	series *metriclabel.Series[prometheus.Observer]
}

var _ prometheus.Collector = (*Metrics)(nil)

// New returns Metrics configured by opts. Register it with a
// [prometheus.Registerer]. It panics if an option is nil.
func New(opts ...Option) *Metrics {
	c := metriclabel.Configure("egressprom", opts, Option.apply)
	hist := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		core:  metriclabel.NewCore("egressprom", c),
		rater: c.Rater,

		duration:      hist("egress_request_duration_seconds", "Duration of each attempt an egress Transport sent, from the base RoundTripper's call to its response or error, and of each request it refused to send.", metriclabel.DurationBuckets, "method", "host", "code", "error_type", "resend_count"),
		queueWait:     hist("egress_queue_wait_seconds", "Time requests waited in line for a queue slot, of those that waited.", metriclabel.WaitBuckets, "key"),
		limiterWait:   hist("egress_limiter_wait_seconds", "Time attempts waited for their slot in the key's budget, of those that waited.", metriclabel.WaitBuckets, "key"),
		refusals:      counter("egress_refusals_total", "Requests the Transport refused to send, by key and reason.", "key", "reason"),
		retries:       counter("egress_retries_total", "Responses discarded to try the request again, by key and status code.", "key", "code"),
		pauses:        hist("egress_pause_duration_seconds", "Pauses of a key asked for by the upstream, and how long each lasts.", metriclabel.WaitBuckets, "key"),
		pauseFailures: counter("egress_pause_failures_total", "Pauses the limiter failed to record.", "key"),
		clamps:        counter("egress_quota_clamps_total", "Fields of upstream quota statements clamped for absurd values before booking, by key and field.", "key", "field"),
		redisErrors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "egress_redis_errors_total", Help: "Calls to Redis that failed."}),
		redisRecover:  prometheus.NewCounter(prometheus.CounterOpts{Name: "egress_redis_recoveries_total", Help: "Times Redis answered again after failing."}),
		redisDropped:  prometheus.NewCounter(prometheus.CounterOpts{Name: "egress_redis_settles_dropped_total", Help: "Settles (units given back or charged once a request's cost is known) dropped unsent to Redis."}),
		redisTrips:    hist("egress_redis_round_trip_duration_seconds", "Round trips to Redis: each command, or each pipeline, from sending it to its reply.", metriclabel.RedisBuckets, "error_type"),

		requestsDesc:  prometheus.NewDesc("egress_requests_total", "Attempts acquired (sent) and requests refused, timed out or canceled, by result.", []string{"result"}, nil),
		waitingDesc:   prometheus.NewDesc("egress_queue_waiting_requests", "Requests waiting in line for a queue slot.", nil, nil),
		inFlightDesc:  prometheus.NewDesc("egress_in_flight_requests", "Queue slots held: requests in RoundTrip or whose response body is open.", nil, nil),
		learnedDesc:   prometheus.NewDesc("egress_learned_rate", "The rate the limiter learned for a key, in units per second.", []string{"key"}, nil),
		redisOpenDesc: prometheus.NewDesc("egress_redis_breaker_open", "1 while calls to Redis are failing and the circuit breaker is open, else 0.", nil, nil),
	}
	m.series = metriclabel.NewSeries(m.core.Hosts, func(k metriclabel.SeriesKey) prometheus.Observer {
		code := ""
		if k.Code != 0 {
			code = strconv.Itoa(k.Code)
		}
		resend := ""
		if k.Resend > 0 {
			resend = strconv.Itoa(k.Resend)
		}
		return m.duration.WithLabelValues(k.Method, k.Host, code, k.ErrorType, resend)
	})
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.duration, m.queueWait, m.limiterWait, m.refusals, m.retries, m.pauses, m.pauseFailures, m.clamps, m.redisErrors, m.redisRecover, m.redisDropped, m.redisTrips}
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.requestsDesc
	ch <- m.waitingDesc
	ch <- m.inFlightDesc
	ch <- m.redisOpenDesc
	if m.rater != nil {
		ch <- m.learnedDesc
	}
}

// Collect implements [prometheus.Collector]. It reads the Stats of every
// Transport given to [Metrics.Instrument].
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	t := m.core.Totals()
	for i, n := range t.Results {
		ch <- prometheus.MustNewConstMetric(m.requestsDesc, prometheus.CounterValue, float64(n), metriclabel.Results[i])
	}
	ch <- prometheus.MustNewConstMetric(m.waitingDesc, prometheus.GaugeValue, float64(t.Waiting))
	ch <- prometheus.MustNewConstMetric(m.inFlightDesc, prometheus.GaugeValue, float64(t.InFlight))
	open := 0.0
	if m.core.BreakerOpen() {
		open = 1
	}
	ch <- prometheus.MustNewConstMetric(m.redisOpenDesc, prometheus.GaugeValue, open)
	if m.rater != nil {
		for _, key := range m.core.Keys.Values() {
			ch <- prometheus.MustNewConstMetric(m.learnedDesc, prometheus.GaugeValue, m.rater.Rate(key), key)
		}
	}
}

// Instrument returns an [http.RoundTripper] that sends requests through t
// and counts those whose context ended before a response came, and makes
// m report t's queue (its Stats) and attempts. Send every request through
// the returned RoundTripper; install [Metrics.Observer] on t for attempts,
// waits, refusals, retries and pauses. Instrument panics if t is nil.
func (m *Metrics) Instrument(t *egress.Transport) http.RoundTripper {
	return m.core.Instrument(t)
}

// sent records one attempt on the wire.
func (m *Metrics) sent(s egress.SentInfo) {
	if m.rater != nil {
		m.core.Keys.Label(s.Key) // so that its learned rate is reported
	}
	m.series.Get(metriclabel.SentKey(s)).Observe(s.Duration.Seconds())
}
