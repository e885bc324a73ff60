package egressotel

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/metriclabel"
)

// ScopeName is the instrumentation scope of every instrument.
const ScopeName = "github.com/egress-go/egress/extra/egressotel"

// DefaultMaxKeys is how many distinct keys, and how many distinct server
// addresses, get an attribute value of their own unless [WithMaxKeys] or
// [WithKeys] says otherwise.
const DefaultMaxKeys = 100

// Attribute keys of the limiter instruments.
const (
	// KeyAttr is the budget key, bounded as the package doc says.
	KeyAttr = attribute.Key("egress.rate_limiting.key")
	// ResultAttr is the result of an attempt to acquire: acquired,
	// refused_full, refused_limit, timeout, canceled or limiter_error.
	ResultAttr = attribute.Key("egress.rate_limiting.result")
	// ReasonAttr says why a request was refused: queue_full,
	// limit_exceeded, timeout or limiter_error.
	ReasonAttr = attribute.Key("egress.rate_limiting.reason")
)

// Semantic-convention attribute keys, spelt out so that the module needs
// no semconv package.
const (
	methodAttr     = attribute.Key("http.request.method")
	statusAttr     = attribute.Key("http.response.status_code")
	errorTypeAttr  = attribute.Key("error.type")
	serverAddrAttr = attribute.Key("server.address")
	serverPortAttr = attribute.Key("server.port")
	resendAttr     = attribute.Key("http.request.resend_count")
)

// durationBuckets are the bucket boundaries OpenTelemetry advises for
// http.client.request.duration, stretched to a minute, since a request
// may wait that long for its slot.
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

// WithKeys makes exactly keys attribute values of their own; every other
// key is recorded as [Other]. Server addresses stay bounded by
// [WithMaxKeys].
func WithKeys(keys ...string) Option {
	keys = append([]string{}, keys...)
	return optionFunc(func(c *config) { c.keys = keys })
}

// WithMaxKeys gives the first n distinct keys seen an attribute value of
// their own, and records later ones as [Other]; the same cap bounds
// server.address. 0 records every key as Other. WithMaxKeys panics if n
// is negative.
func WithMaxKeys(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("egressotel: WithMaxKeys given a negative n: %d", n))
	}
	return optionFunc(func(c *config) { c.maxKeys = n })
}

// Metrics records what the Transports it watches do, on instruments of
// the meter [ScopeName]. Install [Metrics.Observer] on each Transport and
// send requests through [Metrics.Instrument]. The instruments are:
//
//	http.client.request.duration (s, histogram)                         each attempt sent, from the base RoundTripper's call to its response or error (retries are attempts of their own), and each request refused unsent; http.request.method, server.address, server.port, http.response.status_code, http.request.resend_count, error.type
//	egress.rate_limiting.requests ({request}, observable counter)       attempts acquired (sent), and requests refused_full, refused_limit, timeout, canceled or failed on a limiter_error; egress.rate_limiting.result
//	egress.rate_limiting.request.time_in_queue (s, histogram)           time in line for a queue slot, of requests that waited; egress.rate_limiting.key
//	egress.rate_limiting.request.time_in_limiter (s, histogram)         time waited for a slot in the key's budget, of attempts that waited; egress.rate_limiting.key
//	egress.rate_limiting.refusals ({request}, counter)                  refusals by key and egress.rate_limiting.reason
//	egress.rate_limiting.retries ({request}, counter)                   responses discarded to try again; key and http.response.status_code
//	egress.rate_limiting.pause.duration (s, histogram)                  pauses of a key asked for by the upstream (count and seconds)
//	egress.rate_limiting.pause.failures ({pause}, counter)              pauses the limiter failed to record
//	egress.rate_limiting.queued_requests ({request}, observable updown) requests in line for a queue slot
//	egress.rate_limiting.active_request_leases ({request}, observable updown) queue slots held
//	egress.redis.errors, egress.redis.recoveries ({event}, counters)    failed calls to Redis, and recoveries
//	egress.redis.breaker.state (observable gauge)                       1 while Redis is failing (the circuit breaker is open), else 0
//
// http.client.request.duration is recorded by [Metrics.Observer] for
// each attempt on the wire (its Sent func), with
// http.request.resend_count = attempt-1 when the attempt is a retry, and
// by [Metrics.Instrument] for each request the Transport refused to send
// (queue_full, limit_exceeded, timeout), from RoundTrip to the refusal.
// A request whose context ended while it waited, before any attempt was
// sent, is counted in egress.rate_limiting.requests only.
//
// error.type is the status code for a response of 400 or more, as the
// conventions ask, and for an attempt or request that got no response:
// queue_full, limit_exceeded, timeout, canceled or _OTHER.
//
// In egress.rate_limiting.requests, canceled and timeout count requests
// whose context ended before a response came, whether they were waiting
// or on the wire, so a request sent and then cancelled counts as acquired
// too. Redis round trips are not seen by egress: count them on the
// go-redis client (go-redis's extra/redisotel).
//
// Metrics is safe for concurrent use.
type Metrics struct {
	keys, hosts *metriclabel.Bounded

	duration      metric.Float64Histogram
	queueWait     metric.Float64Histogram
	limiterWait   metric.Float64Histogram
	refusals      metric.Int64Counter
	retries       metric.Int64Counter
	pauses        metric.Float64Histogram
	pauseFailures metric.Int64Counter
	redisErrors   metric.Int64Counter
	redisRecover  metric.Int64Counter

	redisOpen atomic.Bool
	// Results that the Transport's Stats do not count.
	refusedFull, refusedLimit, timeouts, canceled, limiterErrors atomic.Int64

	// mu guards transports and series.
	mu         sync.RWMutex
	transports []*egress.Transport
	series     map[seriesKey][]metric.RecordOption
}

// seriesKey names one series of http.client.request.duration by its
// attribute values.
type seriesKey struct {
	method, host string
	port         int
	code         int // 0 when no response came
	errorType    string
	resend       int // attempt-1

}

// New returns Metrics whose instruments come from mp's meter [ScopeName].
// It returns an error if an instrument cannot be made, and panics if an
// option is nil or mp is nil.
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	if mp == nil {
		panic("egressotel: New given a nil metric.MeterProvider")
	}
	c := config{maxKeys: DefaultMaxKeys}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("egressotel: New given a nil Option at index %d", i))
		}
		o.apply(&c)
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{
		keys:   metriclabel.New(c.keys, c.maxKeys),
		hosts:  metriclabel.New(nil, c.maxKeys),
		series: make(map[seriesKey][]metric.RecordOption),
	}
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.duration = hist("http.client.request.duration", "Duration of HTTP client requests.")
	m.queueWait = hist("egress.rate_limiting.request.time_in_queue", "Time requests waited in line for a queue slot, of those that waited.")
	m.limiterWait = hist("egress.rate_limiting.request.time_in_limiter", "Time attempts waited for their slot in the key's budget, of those that waited.")
	m.refusals = counter("egress.rate_limiting.refusals", "{request}", "Requests the Transport refused to send.")
	m.retries = counter("egress.rate_limiting.retries", "{request}", "Responses discarded to try the request again.")
	m.pauses = hist("egress.rate_limiting.pause.duration", "Pauses of a key asked for by the upstream, and how long each lasts.")
	m.pauseFailures = counter("egress.rate_limiting.pause.failures", "{pause}", "Pauses the limiter failed to record.")
	m.redisErrors = counter("egress.redis.errors", "{event}", "Calls to Redis that failed.")
	m.redisRecover = counter("egress.redis.recoveries", "{event}", "Times Redis answered again after failing.")

	requests, err := meter.Int64ObservableCounter("egress.rate_limiting.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Attempts acquired (sent) and requests refused, timed out or canceled."))
	errs = append(errs, err)
	queued, err := meter.Int64ObservableUpDownCounter("egress.rate_limiting.queued_requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting in line for a queue slot."))
	errs = append(errs, err)
	leases, err := meter.Int64ObservableUpDownCounter("egress.rate_limiting.active_request_leases", metric.WithUnit("{request}"),
		metric.WithDescription("Queue slots held: requests in RoundTrip or whose response body is open."))
	errs = append(errs, err)
	breaker, err := meter.Int64ObservableGauge("egress.redis.breaker.state",
		metric.WithDescription("1 while calls to Redis are failing and the circuit breaker is open, else 0."))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("egressotel: making instruments: %w", err)
		}
	}
	results := make(map[string]metric.ObserveOption)
	for _, r := range []string{"acquired", "refused_full", "refused_limit", "timeout", "canceled", "limiter_error"} {
		results[r] = metric.WithAttributeSet(attribute.NewSet(ResultAttr.String(r)))
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
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
		o.ObserveInt64(requests, int64(sent), results["acquired"])
		o.ObserveInt64(requests, m.refusedFull.Load(), results["refused_full"])
		o.ObserveInt64(requests, m.refusedLimit.Load(), results["refused_limit"])
		o.ObserveInt64(requests, m.timeouts.Load(), results["timeout"])
		o.ObserveInt64(requests, m.canceled.Load(), results["canceled"])
		o.ObserveInt64(requests, m.limiterErrors.Load(), results["limiter_error"])
		o.ObserveInt64(queued, int64(waiting))
		o.ObserveInt64(leases, int64(inFlight))
		var open int64
		if m.redisOpen.Load() {
			open = 1
		}
		o.ObserveInt64(breaker, open)
		return nil
	}, requests, queued, leases, breaker)
	if err != nil {
		return nil, fmt.Errorf("egressotel: registering callback: %w", err)
	}
	return m, nil
}

// Instrument returns an [http.RoundTripper] that sends requests through t
// and measures each one it refuses, and makes m report t's queue (its Stats) and
// attempts. Send every request through the returned RoundTripper; install
// [Metrics.Observer] on t for waits, refusals, retries and pauses.
// Instrument panics if t is nil.
func (m *Metrics) Instrument(t *egress.Transport) http.RoundTripper {
	if t == nil {
		panic("egressotel: Instrument given a nil *egress.Transport")
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
		k.host, k.port = hostPort(req.URL)
	}
	it.m.duration.Record(req.Context(), elapsed.Seconds(), it.m.durationSeries(k)...)
	return resp, err
}

// sent records one attempt on the wire.
func (m *Metrics) sent(s egress.SentInfo) {
	k := seriesKey{code: s.StatusCode, resend: max(s.Attempt-1, 0)}
	ctx := context.Background()
	if req := s.Request; req != nil {
		ctx, k.method = req.Context(), metriclabel.Method(req.Method)
		if req.URL != nil {
			k.host, k.port = hostPort(req.URL)
		}
	}
	if s.Err != nil {
		k.errorType = metriclabel.ErrorType(s.Err)
	}
	m.duration.Record(ctx, s.Duration.Seconds(), m.durationSeries(k)...)
}

// CloseIdleConnections closes the Transport's idle connections.
func (it *instrumented) CloseIdleConnections() { it.t.CloseIdleConnections() }

// durationSeries returns the options that record a measurement of
// http.client.request.duration with k's attributes, whose host is not yet
// bounded. Each series is built once and kept, so that a request
// allocates nothing here: the goal of ≤ 3 allocations of overhead per
// request holds with metrics attached.
func (m *Metrics) durationSeries(k seriesKey) []metric.RecordOption {
	// A host with a value of its own is its own label: one lookup.
	m.mu.RLock()
	opts, ok := m.series[k]
	m.mu.RUnlock()
	if ok {
		return opts
	}
	k.host = m.hosts.Label(k.host)
	if k.host == Other {
		k.port = 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if opts, ok := m.series[k]; ok {
		return opts
	}
	attrs := []attribute.KeyValue{methodAttr.String(k.method), serverAddrAttr.String(k.host)}
	if k.port != 0 {
		attrs = append(attrs, serverPortAttr.Int(k.port))
	}
	if k.code != 0 {
		attrs = append(attrs, statusAttr.Int(k.code))
	}
	if k.resend > 0 {
		attrs = append(attrs, resendAttr.Int(k.resend))
	}
	switch {
	case k.errorType != "":
		attrs = append(attrs, errorTypeAttr.String(k.errorType))
	case k.code >= 400:
		attrs = append(attrs, errorTypeAttr.String(strconv.Itoa(k.code)))
	}
	opts = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	m.series[k] = opts
	return opts
}

// hostPort returns a URL's server.address and server.port, filling in
// the scheme's default port. url.URL's Hostname and Port slice the host
// without allocating, as net.SplitHostPort does not when there is no port.
func hostPort(u *url.URL) (string, int) {
	if p := u.Port(); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil {
			return u.Hostname(), 0
		}
		return u.Hostname(), port
	}
	switch u.Scheme {
	case "https":
		return u.Hostname(), 443
	case "http":
		return u.Hostname(), 80
	}
	return u.Hostname(), 0
}
