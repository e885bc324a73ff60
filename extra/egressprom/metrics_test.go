package egressprom_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// histogram returns the sample count and sum of name's series whose labels
// include want.
func histogram(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, want) {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// TestMetricsAfterRealRequests sends real requests through an egress
// Transport to an httptest server, and scrapes what Metrics report.
func TestMetricsAfterRealRequests(t *testing.T) {
	srv := metrictest.Upstream(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	reg := prometheus.NewPedanticRegistry()
	m := egressprom.New()
	reg.MustRegister(m)

	paused := metrictest.RealRequests(t, srv, attachTo(m), func() {
		require.NoError(t, testutil.ScrapeAndCompare(scrape(t, reg), strings.NewReader(`
# HELP egress_in_flight_requests Queue slots held: requests in RoundTrip or whose response body is open.
# TYPE egress_in_flight_requests gauge
egress_in_flight_requests 1
# HELP egress_queue_waiting_requests Requests waiting in line for a queue slot.
# TYPE egress_queue_waiting_requests gauge
egress_queue_waiting_requests 1
`), "egress_in_flight_requests", "egress_queue_waiting_requests"))
	})

	// Attempts sent: A, B, and the 429 and its retry.
	require.NoError(t, testutil.ScrapeAndCompare(scrape(t, reg), strings.NewReader(`
# HELP egress_in_flight_requests Queue slots held: requests in RoundTrip or whose response body is open.
# TYPE egress_in_flight_requests gauge
egress_in_flight_requests 0
# HELP egress_queue_waiting_requests Requests waiting in line for a queue slot.
# TYPE egress_queue_waiting_requests gauge
egress_queue_waiting_requests 0
# HELP egress_requests_total Attempts acquired (sent) and requests refused, timed out or canceled, by result.
# TYPE egress_requests_total counter
egress_requests_total{result="acquired"} 4
egress_requests_total{result="canceled"} 1
egress_requests_total{result="limiter_error"} 0
egress_requests_total{result="refused_full"} 1
egress_requests_total{result="refused_limit"} 1
egress_requests_total{result="timeout"} 0
# HELP egress_refusals_total Requests the Transport refused to send, by key and reason.
# TYPE egress_refusals_total counter
egress_refusals_total{key="`+host+`",reason="queue_full"} 1
egress_refusals_total{key="refuse",reason="limit_exceeded"} 1
# HELP egress_retries_total Responses discarded to try the request again, by key and status code.
# TYPE egress_retries_total counter
egress_retries_total{code="429",key="`+host+`"} 1
`), "egress_in_flight_requests", "egress_queue_waiting_requests", "egress_requests_total", "egress_refusals_total", "egress_retries_total"))

	tests := []struct {
		name      string
		giveName  string
		giveLabel map[string]string
		wantCount uint64
	}{
		{name: "first attempts' 200s: A and B", giveName: "egress_request_duration_seconds", giveLabel: map[string]string{"method": "GET", "host": host, "code": "200", "error_type": "", "resend_count": ""}, wantCount: 2},
		{name: "the 429", giveName: "egress_request_duration_seconds", giveLabel: map[string]string{"code": "429", "resend_count": ""}, wantCount: 1},
		{name: "its retry", giveName: "egress_request_duration_seconds", giveLabel: map[string]string{"code": "200", "resend_count": "1"}, wantCount: 1},
		{name: "queue full", giveName: "egress_request_duration_seconds", giveLabel: map[string]string{"code": "", "error_type": "queue_full"}, wantCount: 1},
		{name: "limit", giveName: "egress_request_duration_seconds", giveLabel: map[string]string{"code": "", "error_type": "limit_exceeded"}, wantCount: 1},
		{name: "canceled before it was sent", giveName: "egress_request_duration_seconds", giveLabel: map[string]string{"code": "", "error_type": "canceled"}, wantCount: 0},
		{name: "queue wait", giveName: "egress_queue_wait_seconds", giveLabel: map[string]string{"key": host}, wantCount: 1},
		{name: "limiter waits", giveName: "egress_limiter_wait_seconds", giveLabel: map[string]string{"key": host}, wantCount: 4},
		{name: "pause", giveName: "egress_pause_duration_seconds", giveLabel: map[string]string{"key": host}, wantCount: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := histogram(t, reg, tt.giveName, tt.giveLabel)
			assert.Equal(t, tt.wantCount, got)
		})
	}
	_, pauseSum := histogram(t, reg, "egress_pause_duration_seconds", map[string]string{"key": host})
	assert.InDelta(t, 0.020, pauseSum, 1e-9, "the pause lasts the server's 20ms")
	_, waitSum := histogram(t, reg, "egress_limiter_wait_seconds", map[string]string{"key": host})
	// Each attempt waited its 5ms, counted from just after the booking.
	assert.GreaterOrEqual(t, waitSum, 4*0.004, "each attempt waited about 5ms")
	assert.Equal(t, int32(1), paused, "the program's own Observer still hears of the pause")

	mfs, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems, "promlint")
	assert.Len(t, mfs, 13, "every metric family was linted, with samples")
}

// scrape serves reg over HTTP, as Prometheus scrapes it, and returns the
// URL.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestCardinalityIsBounded(t *testing.T) {
	tests := []struct {
		name       string
		giveKeys   int
		giveOpts   []egressprom.Option
		wantSeries int
		wantKey    string // a label value that must be present
	}{
		{name: "default cap", giveKeys: 100_000, wantSeries: egressprom.DefaultMaxKeys + 1, wantKey: "key-0"},
		{name: "cap of 10", giveKeys: 10_000, giveOpts: []egressprom.Option{egressprom.WithMaxKeys(10)}, wantSeries: 11, wantKey: "key-9"},
		{name: "cap of 0", giveKeys: 10_000, giveOpts: []egressprom.Option{egressprom.WithMaxKeys(0)}, wantSeries: 1, wantKey: egressprom.Other},
		{name: "allow-list", giveKeys: 100_000, giveOpts: []egressprom.Option{egressprom.WithKeys("key-7", "key-99999")}, wantSeries: 3, wantKey: "key-99999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := egressprom.New(tt.giveOpts...)
			metrictest.ManyKeys(m.Observer(nil), tt.giveKeys)
			for _, name := range []string{"egress_refusals_total", "egress_limiter_wait_seconds", "egress_pause_duration_seconds", "egress_retries_total"} {
				assert.Equal(t, tt.wantSeries, testutil.CollectAndCount(m, name), name)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(m)
			_, sum := histogram(t, reg, "egress_pause_duration_seconds", nil)
			assert.Positive(t, sum)
			count, _ := histogram(t, reg, "egress_pause_duration_seconds", map[string]string{"key": tt.wantKey})
			assert.Positive(t, count, "series for %q", tt.wantKey)
		})
	}
}

// TestResendCount retries a real 429 (Retry-After: 0) once and checks
// that each attempt is one sample of egress_request_duration_seconds,
// the retry's with resend_count 1, the first's without one.
func TestResendCount(t *testing.T) {
	srv := metrictest.Upstream(t)
	m := egressprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	_, rt := attachTo(m)(nil, egress.WithRetry(metrictest.NoJitter))
	metrictest.Get(t, rt, srv.URL+"/retry-now", http.StatusOK)

	host := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name      string
		giveLabel map[string]string
		wantCount uint64
	}{
		{name: "the 429", giveLabel: map[string]string{"method": "GET", "host": host, "code": "429", "resend_count": ""}, wantCount: 1},
		{name: "its retry", giveLabel: map[string]string{"method": "GET", "host": host, "code": "200", "resend_count": "1"}, wantCount: 1},
		{name: "no first attempt answered 200", giveLabel: map[string]string{"code": "200", "resend_count": ""}, wantCount: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := histogram(t, reg, "egress_request_duration_seconds", tt.giveLabel)
			assert.Equal(t, tt.wantCount, got)
		})
	}
	assert.Equal(t, 2, testutil.CollectAndCount(m, "egress_request_duration_seconds"))
}

func TestHostsAreBounded(t *testing.T) {
	m := egressprom.New(egressprom.WithMaxKeys(5))
	rt := m.Instrument(egress.NewTransport(metrictest.MemBase{}, egress.WithLimiter(metrictest.StepLimiter{}), egress.WithObserver(m.Observer(nil))))
	for i := range 1000 {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://host-%d.example/", i), nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	assert.Equal(t, 6, testutil.CollectAndCount(m, "egress_request_duration_seconds"))
}

func TestMethodsAreBounded(t *testing.T) {
	m := egressprom.New()
	rt := m.Instrument(egress.NewTransport(metrictest.MemBase{}, egress.WithObserver(m.Observer(nil))))
	for _, method := range []string{"GET", "POST", "BREW", "PROPFIND", "get"} {
		req, err := http.NewRequest(method, "http://api.example/", nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	assert.Equal(t, 3, testutil.CollectAndCount(m, "egress_request_duration_seconds"), "GET, POST and _OTHER")
}

func TestObserverPassesEventsOn(t *testing.T) {
	var got []string
	next := &egress.Observer{
		Waited:   func(w egress.WaitInfo) { got = append(got, "waited "+w.Key) },
		Refused:  func(r egress.RefusalInfo) { got = append(got, "refused "+r.Key) },
		Retrying: func(r egress.RetryInfo) { got = append(got, "retrying "+r.Key) },
		Paused:   func(p egress.PauseInfo) { got = append(got, "paused "+p.Key) },
	}
	o := egressprom.New().Observer(next)
	o.Waited(egress.WaitInfo{Key: "a", Queue: time.Millisecond})
	o.Refused(egress.RefusalInfo{Key: "b", Err: errors.New("store down")})
	o.Retrying(egress.RetryInfo{Key: "c", StatusCode: 503})
	o.Paused(egress.PauseInfo{Key: "d", Err: errors.New("store down")})
	assert.Equal(t, []string{"waited a", "refused b", "retrying c", "paused d"}, got)

	// Without next, or with a next that leaves funcs nil, nothing breaks.
	for _, n := range []*egress.Observer{nil, {}} {
		o := egressprom.New().Observer(n)
		o.Waited(egress.WaitInfo{Key: "a"})
		o.Refused(egress.RefusalInfo{Key: "b", Err: queue.ErrFull})
		o.Retrying(egress.RetryInfo{Key: "c"})
		o.Paused(egress.PauseInfo{Key: "d"})
	}
}

func TestRefusalReasons(t *testing.T) {
	tests := []struct {
		name       string
		giveErr    error
		wantReason string
		wantResult string
	}{
		{name: "queue full", giveErr: fmt.Errorf("egress: %w", queue.ErrFull), wantReason: "queue_full", wantResult: "refused_full"},
		{name: "limit", giveErr: &throttle.LimitError{Key: "k", RetryAfter: time.Second}, wantReason: "limit_exceeded", wantResult: "refused_limit"},
		{name: "deadline", giveErr: &throttle.LimitError{Key: "k", Deadline: true}, wantReason: "timeout", wantResult: "timeout"},
		{name: "limiter failed", giveErr: &redislimit.UnavailableError{Err: context.DeadlineExceeded}, wantReason: "limiter_error", wantResult: "limiter_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := egressprom.New()
			m.Observer(nil).Refused(egress.RefusalInfo{Key: "k", Attempt: 1, Err: tt.giveErr})
			reg := prometheus.NewRegistry()
			reg.MustRegister(m)
			assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP egress_refusals_total Requests the Transport refused to send, by key and reason.
# TYPE egress_refusals_total counter
egress_refusals_total{key="k",reason="`+tt.wantReason+`"} 1
`), "egress_refusals_total"))
			got := map[string]float64{}
			mfs, err := reg.Gather()
			require.NoError(t, err)
			for _, mf := range mfs {
				for _, s := range mf.GetMetric() {
					if mf.GetName() == "egress_requests_total" {
						got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
					}
				}
			}
			want := map[string]float64{"acquired": 0, "refused_full": 0, "refused_limit": 0, "timeout": 0, "canceled": 0, "limiter_error": 0}
			want[tt.wantResult] = 1
			assert.Equal(t, want, got)
		})
	}
}

func TestRedisObserver(t *testing.T) {
	m := egressprom.New()
	var heard []redislimit.Event
	f := m.RedisObserver(func(e redislimit.Event) { heard = append(heard, e) })
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	tests := []struct {
		name       string
		give       redislimit.Event
		wantErrors float64
		wantRecov  float64
		wantOpen   float64
	}{
		{name: "failure", give: redislimit.Event{Err: errors.New("dial: refused")}, wantErrors: 1, wantOpen: 1},
		{name: "another failure", give: redislimit.Event{Err: errors.New("dial: refused"), Down: time.Second}, wantErrors: 2, wantOpen: 1},
		{name: "recovery", give: redislimit.Event{Recovered: true, Down: 2 * time.Second}, wantErrors: 2, wantRecov: 1, wantOpen: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f(tt.give)
			assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP egress_redis_breaker_open 1 while calls to Redis are failing and the circuit breaker is open, else 0.
# TYPE egress_redis_breaker_open gauge
egress_redis_breaker_open %v
# HELP egress_redis_errors_total Calls to Redis that failed.
# TYPE egress_redis_errors_total counter
egress_redis_errors_total %v
# HELP egress_redis_recoveries_total Times Redis answered again after failing.
# TYPE egress_redis_recoveries_total counter
egress_redis_recoveries_total %v
`, tt.wantOpen, tt.wantErrors, tt.wantRecov)), "egress_redis_breaker_open", "egress_redis_errors_total", "egress_redis_recoveries_total"))
		})
	}
	assert.Len(t, heard, 3)
}

func TestPanics(t *testing.T) {
	tests := []struct {
		name string
		give func()
		want string
	}{
		{name: "nil option", give: func() { egressprom.New(nil) }, want: "egressprom: New given a nil Option at index 0"},
		{name: "negative cap", give: func() { egressprom.WithMaxKeys(-1) }, want: "egressprom: WithMaxKeys given a negative n: -1"},
		{name: "nil learner", give: func() { egressprom.WithLearnedRate(nil) }, want: "egressprom: WithLearnedRate given a nil limiter"},
		{name: "nil transport", give: func() { egressprom.New().Instrument(nil) }, want: "egressprom: Instrument given a nil *egress.Transport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.give)
		})
	}
}

// TestPromlintEveryFamily records one of everything, so that every
// metric family has a sample, and lints them all.
func TestPromlintEveryFamily(t *testing.T) {
	a, err := throttle.NewAdaptive(throttle.PerSecond(10))
	require.NoError(t, err)
	m := egressprom.New(egressprom.WithLearnedRate(a))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	o := m.Observer(nil)
	o.Waited(egress.WaitInfo{Key: "k", Attempt: 1, Queue: time.Millisecond, Limiter: time.Millisecond})
	o.Refused(egress.RefusalInfo{Key: "k", Attempt: 1, Err: queue.ErrFull})
	o.Retrying(egress.RetryInfo{Key: "k", Attempt: 1, StatusCode: 429, Delay: time.Second})
	o.Paused(egress.PauseInfo{Key: "k", StatusCode: 429, Duration: time.Second})
	o.Paused(egress.PauseInfo{Key: "k", StatusCode: 429, Duration: time.Second, Err: errors.New("store down")})
	o.Clamped(egress.ClampInfo{Key: "k", StatusCode: 200, Fields: []string{"Limit"}})
	m.RedisObserver(nil)(redislimit.Event{Err: errors.New("store down")})
	ctx := context.Background()
	require.NoError(t, m.RedisHook().ProcessHook(func(context.Context, redis.Cmder) error { return nil })(ctx, redis.NewCmd(ctx, "ping")))
	req, err := http.NewRequest(http.MethodGet, "http://api.example/", nil)
	require.NoError(t, err)
	resp, err := m.Instrument(egress.NewTransport(metrictest.MemBase{}, egress.WithObserver(o))).RoundTrip(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	assert.Equal(t, []string{
		"egress_in_flight_requests",
		"egress_learned_rate",
		"egress_limiter_wait_seconds",
		"egress_pause_duration_seconds",
		"egress_pause_failures_total",
		"egress_queue_wait_seconds",
		"egress_queue_waiting_requests",
		"egress_quota_clamps_total",
		"egress_redis_breaker_open",
		"egress_redis_errors_total",
		"egress_redis_recoveries_total",
		"egress_redis_round_trip_duration_seconds",
		"egress_redis_settles_dropped_total",
		"egress_refusals_total",
		"egress_request_duration_seconds",
		"egress_requests_total",
		"egress_retries_total",
	}, names)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// attachTo attaches m to a Transport built with opts.
func attachTo(m *egressprom.Metrics) metrictest.AttachTo {
	return func(next *egress.Observer, opts ...egress.Option) (*egress.Transport, http.RoundTripper) {
		t := egress.NewTransport(nil, append(opts, egress.WithObserver(m.Observer(next)))...)
		return t, m.Instrument(t)
	}
}
