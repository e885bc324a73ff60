package egressotel

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

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
const DefaultMaxKeys = metriclabel.DefaultMaxKeys

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
	// FieldAttr names the field of a quota statement that was clamped:
	// Limit, Remaining, Reset or Window.
	FieldAttr = attribute.Key("egress.rate_limiting.field")
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

// An Option configures [New].
type Option interface {
	apply(*metriclabel.Config)
}

type option metriclabel.Option

func (o option) apply(c *metriclabel.Config) { o(c) }

// WithKeys makes exactly keys attribute values of their own; every other
// key is recorded as [Other]. Server addresses stay bounded by
// [WithMaxKeys].
func WithKeys(keys ...string) Option { return option(metriclabel.WithKeys(keys)) }

// WithMaxKeys gives the first n distinct keys seen an attribute value of
// their own, and records later ones as [Other]; the same cap bounds
// server.address. 0 records every key as Other. WithMaxKeys panics if n
// is negative.
func WithMaxKeys(n int) Option { return option(metriclabel.WithMaxKeys("egressotel", n)) }

// WithLearnedRate reports the rate r learned for each key with an
// attribute value of its own (see [WithKeys], [WithMaxKeys]) on
// egress.rate_limiting.learned_rate. r is a
// [github.com/egress-go/egress/throttle.Adaptive], or any
// limiter with its Rate method. Keys past the cap are not reported: their
// rates do not add up. WithLearnedRate panics if r is nil.
func WithLearnedRate(r interface{ Rate(key string) float64 }) Option {
	return option(metriclabel.WithLearnedRate("egressotel", r))
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
//	egress.rate_limiting.quota.clamps ({field}, counter)                fields of upstream quota statements clamped for absurd values; key and egress.rate_limiting.field
//	egress.rate_limiting.queued_requests ({request}, observable updown) requests in line for a queue slot
//	egress.rate_limiting.active_request_leases ({request}, observable updown) queue slots held
//	egress.rate_limiting.learned_rate ({unit}/s, observable gauge)      with [WithLearnedRate]: the rate learned for each key with a value of its own
//	egress.redis.errors, egress.redis.recoveries ({event}, counters)    failed calls to Redis, and recoveries
//	egress.redis.breaker.state (observable gauge)                       1 while Redis is failing (a circuit breaker is open: on a cluster, any node's), else 0
//	egress.redis.settles.dropped ({settle}, counter)                    settles (units given back or charged once a request's cost is known) dropped unsent
//	egress.redis.round_trip.duration (s, histogram)                     with [Metrics.RedisHook]: each round trip to Redis (its count is the round trips); error.type when it failed
//
// http.client.request.duration is recorded by [Metrics.Observer] for
// each attempt on the wire (its Sent func), with
// http.request.resend_count = attempt-1 when the attempt is a retry, and
// for each request the Transport refused to send (its Refused func:
// queue_full, limit_exceeded, timeout), for the time from the request's
// first wait to the refusal ([egress.RefusalInfo] Elapsed: 0 for a
// request refused before it waited).
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
// too.
//
// Metrics is safe for concurrent use. The zero Metrics is not: make one
// with [New].
type Metrics struct {
	core  *metriclabel.Core
	rater metriclabel.Rater // nil without WithLearnedRate

	duration      metric.Float64Histogram
	queueWait     metric.Float64Histogram
	limiterWait   metric.Float64Histogram
	refusals      metric.Int64Counter
	retries       metric.Int64Counter
	pauses        metric.Float64Histogram
	pauseFailures metric.Int64Counter
	clamps        metric.Int64Counter
	redisErrors   metric.Int64Counter
	redisRecover  metric.Int64Counter
	redisDropped  metric.Int64Counter
	redisTrips    metric.Float64Histogram

	// The attribute sets of each series, built once: a request then
	// allocates nothing and the SDK gets a ready Set (goal: ≤ 1µs and ≤ 3
	// allocs overhead per request with metrics attached).
	series *metriclabel.Series[options]
	keyed  *metriclabel.Cache[keyed, options]
}

// options record a measurement with one attribute set. They are slices
// kept ready, since a variadic argument to the SDK's Record would
// allocate one per call.
type options struct {
	record  []metric.RecordOption
	add     []metric.AddOption
	observe []metric.ObserveOption
}

func optionsOf(attrs ...attribute.KeyValue) options {
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return options{[]metric.RecordOption{set}, []metric.AddOption{set}, []metric.ObserveOption{set}}
}

// keyed names one series of the per-key instruments: the key's value,
// and the refusal's reason, the retried response's status or the clamped
// field, if any.
type keyed struct {
	key, reason, field string
	code               int
}

// New returns Metrics whose instruments come from mp's meter [ScopeName].
// It returns an error if an instrument cannot be made, and panics if an
// option is nil or mp is nil.
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	if mp == nil {
		panic("egressotel: New given a nil metric.MeterProvider")
	}
	c := metriclabel.Configure("egressotel", opts, Option.apply)
	meter := mp.Meter(ScopeName)
	m := &Metrics{core: metriclabel.NewCore("egressotel", c), rater: c.Rater}
	m.series = metriclabel.NewSeries(m.core.Hosts, durationAttrs)
	m.keyed = metriclabel.NewCache(func(k keyed) options {
		attrs := []attribute.KeyValue{KeyAttr.String(k.key)}
		if k.reason != "" {
			attrs = append(attrs, ReasonAttr.String(k.reason))
		}
		if k.code != 0 {
			attrs = append(attrs, statusAttr.Int(k.code))
		}
		if k.field != "" {
			attrs = append(attrs, FieldAttr.String(k.field))
		}
		return optionsOf(attrs...)
	})
	var errs []error
	hist := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.duration = hist("http.client.request.duration", "Duration of HTTP client requests.", metriclabel.DurationBuckets)
	m.queueWait = hist("egress.rate_limiting.request.time_in_queue", "Time requests waited in line for a queue slot, of those that waited.", metriclabel.WaitBuckets)
	m.limiterWait = hist("egress.rate_limiting.request.time_in_limiter", "Time attempts waited for their slot in the key's budget, of those that waited.", metriclabel.WaitBuckets)
	m.refusals = counter("egress.rate_limiting.refusals", "{request}", "Requests the Transport refused to send.")
	m.retries = counter("egress.rate_limiting.retries", "{request}", "Responses discarded to try the request again.")
	m.pauses = hist("egress.rate_limiting.pause.duration", "Pauses of a key asked for by the upstream, and how long each lasts.", metriclabel.WaitBuckets)
	m.pauseFailures = counter("egress.rate_limiting.pause.failures", "{pause}", "Pauses the limiter failed to record.")
	m.clamps = counter("egress.rate_limiting.quota.clamps", "{field}", "Fields of upstream quota statements clamped for absurd values before booking.")
	m.redisDropped = counter("egress.redis.settles.dropped", "{settle}", "Settles (units given back or charged once a request's cost is known) dropped unsent to Redis.")
	m.redisErrors = counter("egress.redis.errors", "{event}", "Calls to Redis that failed.")
	m.redisRecover = counter("egress.redis.recoveries", "{event}", "Times Redis answered again after failing.")
	m.redisTrips = hist("egress.redis.round_trip.duration", "Round trips to Redis: each command, or each pipeline, from sending it to its reply.", metriclabel.RedisBuckets)

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
	learned, err := meter.Float64ObservableGauge("egress.rate_limiting.learned_rate", metric.WithUnit("{unit}/s"),
		metric.WithDescription("The rate the limiter learned for a key, in units per second."))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("egressotel: making instruments: %w", err)
		}
	}
	var results [len(metriclabel.Results)]metric.ObserveOption
	for i, r := range metriclabel.Results {
		results[i] = metric.WithAttributeSet(attribute.NewSet(ResultAttr.String(r)))
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		t := m.core.Totals()
		for i, n := range t.Results {
			o.ObserveInt64(requests, int64(n), results[i])
		}
		o.ObserveInt64(queued, int64(t.Waiting))
		o.ObserveInt64(leases, int64(t.InFlight))
		var open int64
		if m.core.BreakerOpen() {
			open = 1
		}
		o.ObserveInt64(breaker, open)
		if m.rater != nil {
			for _, key := range m.core.Keys.Values() {
				o.ObserveFloat64(learned, m.rater.Rate(key), m.keyed.Get(keyed{key: key}).observe...)
			}
		}
		return nil
	}, requests, queued, leases, breaker, learned)
	if err != nil {
		return nil, fmt.Errorf("egressotel: registering callback: %w", err)
	}
	return m, nil
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
	ctx := context.Background()
	if s.Request != nil {
		ctx = s.Request.Context()
	}
	if m.rater != nil {
		m.core.Keys.Label(s.Key) // so that its learned rate is reported
	}
	m.duration.Record(ctx, s.Duration.Seconds(), m.series.Get(metriclabel.SentKey(s)).record...)
}

// durationAttrs returns the attribute set of one series of
// http.client.request.duration.
func durationAttrs(k metriclabel.SeriesKey) options {
	host, port := hostPort(k.Scheme, k.Host)
	attrs := []attribute.KeyValue{methodAttr.String(k.Method), serverAddrAttr.String(host)}
	if port != 0 {
		attrs = append(attrs, serverPortAttr.Int(port))
	}
	if k.Code != 0 {
		attrs = append(attrs, statusAttr.Int(k.Code))
	}
	if k.Resend > 0 {
		attrs = append(attrs, resendAttr.Int(k.Resend))
	}
	switch {
	case k.ErrorType != "":
		attrs = append(attrs, errorTypeAttr.String(k.ErrorType))
	case k.Code >= 400:
		attrs = append(attrs, errorTypeAttr.String(strconv.Itoa(k.Code)))
	}
	return optionsOf(attrs...)
}

// hostPort returns a URL host's server.address and server.port, filling
// in the scheme's default port; [Other] has no port.
func hostPort(scheme, host string) (string, int) {
	if host == Other {
		return host, 0
	}
	u := url.URL{Scheme: scheme, Host: host}
	if p := u.Port(); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil {
			return u.Hostname(), 0
		}
		return u.Hostname(), port
	}
	switch scheme {
	case "https":
		return u.Hostname(), 443
	case "http":
		return u.Hostname(), 80
	}
	return u.Hostname(), 0
}
