package egressotel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressotel"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// reading is what a manual reader collected, by instrument name.
type reading map[string]metricdata.Aggregation

func read(t *testing.T, r *sdkmetric.ManualReader) reading {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := reading{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, egressotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// count returns the number of samples of histogram name whose attributes
// include want, and their sum.
func (r reading) count(t *testing.T, name string, want ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	h, ok := r[name].(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram", name)
	var n uint64
	var sum float64
	for _, dp := range h.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Count
			sum += dp.Sum
		}
	}
	return n, sum
}

// value returns the value of int64 sum or gauge name at exactly attrs, or
// 0 when nothing was recorded there.
func (r reading) value(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	set := attribute.NewSet(attrs...)
	var dps []metricdata.DataPoint[int64]
	switch d := r[name].(type) {
	case nil: // nothing recorded yet
	case metricdata.Sum[int64]:
		dps = d.DataPoints
	case metricdata.Gauge[int64]:
		dps = d.DataPoints
	default:
		require.Failf(t, "not an int64 sum or gauge", "%s: %T", name, r[name])
	}
	for _, dp := range dps {
		if dp.Attributes.Equals(&set) {
			return dp.Value
		}
	}
	return 0
}

// points returns how many series name has.
func (r reading) points(name string) int {
	switch d := r[name].(type) {
	case metricdata.Histogram[float64]:
		return len(d.DataPoints)
	case metricdata.Sum[int64]:
		return len(d.DataPoints)
	}
	return -1
}

func newMetrics(t *testing.T, opts ...egressotel.Option) (*egressotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := egressotel.New(mp, opts...)
	require.NoError(t, err)
	return m, reader
}

// TestMetricsAfterRealRequests sends real requests through an egress
// Transport to an httptest server, and reads what Metrics record with
// the SDK's manual reader.
func TestMetricsAfterRealRequests(t *testing.T) {
	srv := metrictest.Upstream(t)
	addr := strings.TrimPrefix(srv.URL, "http://")
	host, portText, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	m, reader := newMetrics(t)

	paused := metrictest.RealRequests(t, srv, attachTo(m), func() {
		mid := read(t, reader)
		assert.Equal(t, int64(1), mid.value(t, "egress.rate_limiting.queued_requests"))
		assert.Equal(t, int64(1), mid.value(t, "egress.rate_limiting.active_request_leases"))
	})

	got := read(t, reader)
	result := func(r string) attribute.KeyValue { return egressotel.ResultAttr.String(r) }
	key := egressotel.KeyAttr.String(addr)
	values := []struct {
		name      string
		giveName  string
		giveAttrs []attribute.KeyValue
		want      int64
	}{
		{name: "acquired: A, B, the 429 and its retry", giveName: "egress.rate_limiting.requests", giveAttrs: []attribute.KeyValue{result("acquired")}, want: 4},
		{name: "refused_full", giveName: "egress.rate_limiting.requests", giveAttrs: []attribute.KeyValue{result("refused_full")}, want: 1},
		{name: "refused_limit", giveName: "egress.rate_limiting.requests", giveAttrs: []attribute.KeyValue{result("refused_limit")}, want: 1},
		{name: "canceled", giveName: "egress.rate_limiting.requests", giveAttrs: []attribute.KeyValue{result("canceled")}, want: 1},
		{name: "timeout", giveName: "egress.rate_limiting.requests", giveAttrs: []attribute.KeyValue{result("timeout")}, want: 0},
		{name: "refusal by key", giveName: "egress.rate_limiting.refusals", giveAttrs: []attribute.KeyValue{key, egressotel.ReasonAttr.String("queue_full")}, want: 1},
		{name: "retry", giveName: "egress.rate_limiting.retries", giveAttrs: []attribute.KeyValue{key, attribute.Int("http.response.status_code", 429)}, want: 1},
		{name: "queue empty", giveName: "egress.rate_limiting.queued_requests", want: 0},
		{name: "no slot held", giveName: "egress.rate_limiting.active_request_leases", want: 0},
		{name: "redis healthy", giveName: "egress.redis.breaker.state", want: 0},
	}
	for _, tt := range values {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, got.value(t, tt.giveName, tt.giveAttrs...))
		})
	}

	ok := []attribute.KeyValue{
		attribute.String("http.request.method", "GET"), attribute.String("server.address", host),
		attribute.Int("server.port", port), attribute.Int("http.response.status_code", 200),
	}
	noResponse := func(errType string) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("server.address", host), attribute.String("error.type", errType)}
	}
	histograms := []struct {
		name      string
		giveName  string
		giveAttrs []attribute.KeyValue
		wantCount uint64
	}{
		{name: "200s: A, B and the retry", giveName: "http.client.request.duration", giveAttrs: ok, wantCount: 3},
		{name: "the 429", giveName: "http.client.request.duration", giveAttrs: []attribute.KeyValue{attribute.String("error.type", "429")}, wantCount: 1},
		{name: "the retry", giveName: "http.client.request.duration", giveAttrs: append(ok, attribute.Int("http.request.resend_count", 1)), wantCount: 1},
		{name: "queue full", giveName: "http.client.request.duration", giveAttrs: noResponse("queue_full"), wantCount: 1},
		{name: "limit", giveName: "http.client.request.duration", giveAttrs: noResponse("limit_exceeded"), wantCount: 1},
		{name: "canceled before it was sent", giveName: "http.client.request.duration", giveAttrs: noResponse("canceled"), wantCount: 0},
		{name: "queue wait", giveName: "egress.rate_limiting.request.time_in_queue", giveAttrs: []attribute.KeyValue{key}, wantCount: 1},
		{name: "limiter waits", giveName: "egress.rate_limiting.request.time_in_limiter", giveAttrs: []attribute.KeyValue{key}, wantCount: 4},
		{name: "pause", giveName: "egress.rate_limiting.pause.duration", giveAttrs: []attribute.KeyValue{key}, wantCount: 1},
	}
	for _, tt := range histograms {
		t.Run(tt.name, func(t *testing.T) {
			n, _ := got.count(t, tt.giveName, tt.giveAttrs...)
			assert.Equal(t, tt.wantCount, n)
		})
	}
	_, pauseSum := got.count(t, "egress.rate_limiting.pause.duration", key)
	assert.InDelta(t, 0.020, pauseSum, 1e-9, "the pause lasts the server's 20ms")
	_, waitSum := got.count(t, "egress.rate_limiting.request.time_in_limiter", key)
	// Each attempt waited its 5ms, counted from just after the booking.
	assert.GreaterOrEqual(t, waitSum, 4*0.004, "each attempt waited about 5ms")
	assert.Equal(t, int32(1), paused, "the program's own Observer still hears of the pause")
}

func TestCardinalityIsBounded(t *testing.T) {
	tests := []struct {
		name       string
		giveKeys   int
		giveOpts   []egressotel.Option
		wantSeries int
		wantKey    string // an attribute value that must be present
	}{
		{name: "default cap", giveKeys: 100_000, wantSeries: egressotel.DefaultMaxKeys + 1, wantKey: "key-0"},
		{name: "cap of 10", giveKeys: 10_000, giveOpts: []egressotel.Option{egressotel.WithMaxKeys(10)}, wantSeries: 11, wantKey: "key-9"},
		{name: "cap of 0", giveKeys: 10_000, giveOpts: []egressotel.Option{egressotel.WithMaxKeys(0)}, wantSeries: 1, wantKey: egressotel.Other},
		{name: "allow-list", giveKeys: 100_000, giveOpts: []egressotel.Option{egressotel.WithKeys("key-7", "key-99999")}, wantSeries: 3, wantKey: "key-99999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, reader := newMetrics(t, tt.giveOpts...)
			metrictest.ManyKeys(m.Observer(nil), tt.giveKeys)
			got := read(t, reader)
			for _, name := range []string{"egress.rate_limiting.refusals", "egress.rate_limiting.request.time_in_limiter", "egress.rate_limiting.pause.duration"} {
				assert.Equal(t, tt.wantSeries, got.points(name), name)
			}
			n, _ := got.count(t, "egress.rate_limiting.pause.duration", egressotel.KeyAttr.String(tt.wantKey))
			assert.Positive(t, n, "series for %q", tt.wantKey)
			total, _ := got.count(t, "egress.rate_limiting.pause.duration")
			assert.Equal(t, uint64(tt.giveKeys), total, "no pause is lost")
		})
	}
}

func TestServerAddressIsBounded(t *testing.T) {
	m, reader := newMetrics(t, egressotel.WithMaxKeys(5))
	rt := m.Instrument(egress.NewTransport(metrictest.MemBase{}, egress.WithLimiter(metrictest.StepLimiter{}), egress.WithObserver(m.Observer(nil))))
	for i := range 1000 {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://host-%d.example/", i), nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	got := read(t, reader)
	assert.Equal(t, 6, got.points("http.client.request.duration"))
	n, _ := got.count(t, "http.client.request.duration", attribute.String("server.address", "host-0.example"), attribute.Int("server.port", 443))
	assert.Equal(t, uint64(1), n)
	n, _ = got.count(t, "http.client.request.duration", attribute.String("server.address", egressotel.Other))
	assert.Equal(t, uint64(995), n)
}

func TestErrorTypeOfResponses(t *testing.T) {
	common := []attribute.KeyValue{
		attribute.String("http.request.method", "POST"),
		attribute.String("server.address", "api.example"), attribute.Int("server.port", 8080),
	}
	tests := []struct {
		name       string
		giveStatus int
		wantAttrs  []attribute.KeyValue // beside common
	}{
		{name: "200", giveStatus: 200, wantAttrs: []attribute.KeyValue{attribute.Int("http.response.status_code", 200)}},
		{name: "404", giveStatus: 404, wantAttrs: []attribute.KeyValue{attribute.Int("http.response.status_code", 404), attribute.String("error.type", "404")}},
		{name: "503", giveStatus: 503, wantAttrs: []attribute.KeyValue{attribute.Int("http.response.status_code", 503), attribute.String("error.type", "503")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, reader := newMetrics(t)
			rt := m.Instrument(egress.NewTransport(statusBase(tt.giveStatus), egress.WithObserver(m.Observer(nil))))
			req, err := http.NewRequest(http.MethodPost, "http://api.example:8080/v1", nil)
			require.NoError(t, err)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())

			h := read(t, reader)["http.client.request.duration"].(metricdata.Histogram[float64])
			require.Len(t, h.DataPoints, 1)
			want := attribute.NewSet(append(append([]attribute.KeyValue{}, common...), tt.wantAttrs...)...)
			got := h.DataPoints[0].Attributes
			assert.True(t, got.Equals(&want), "got %v", got.ToSlice())
		})
	}
}

// TestResendCount retries a real 429 (Retry-After: 0) once and checks
// that each attempt is one sample of http.client.request.duration, the
// retry's with http.request.resend_count 1, the first's without it.
func TestResendCount(t *testing.T) {
	srv := metrictest.Upstream(t)
	m, reader := newMetrics(t)
	_, rt := attachTo(m)(nil, egress.WithRetry(metrictest.NoJitter))
	metrictest.Get(t, rt, srv.URL+"/retry-now", http.StatusOK)

	h, ok := read(t, reader)["http.client.request.duration"].(metricdata.Histogram[float64])
	require.True(t, ok)
	type sample struct {
		status, resend int
		errorType      string
	}
	var got []sample
	for _, dp := range h.DataPoints {
		var s sample
		v, _ := dp.Attributes.Value("http.response.status_code")
		s.status = int(v.AsInt64())
		if v, ok := dp.Attributes.Value("http.request.resend_count"); ok {
			s.resend = int(v.AsInt64())
			assert.Positive(t, s.resend, "resend_count is left out on a first attempt")
		}
		v, _ = dp.Attributes.Value("error.type")
		s.errorType = v.AsString()
		for range dp.Count {
			got = append(got, s)
		}
	}
	assert.ElementsMatch(t, []sample{{status: 429, errorType: "429"}, {status: 200, resend: 1}}, got)
}

// statusBase answers every request with one status.
type statusBase int

func (s statusBase) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: int(s), Body: http.NoBody, Request: req, Header: http.Header{}}, nil
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
			m, reader := newMetrics(t)
			m.Observer(nil).Refused(egress.RefusalInfo{Key: "k", Attempt: 1, Err: tt.giveErr})
			got := read(t, reader)
			assert.Equal(t, int64(1), got.value(t, "egress.rate_limiting.refusals", egressotel.KeyAttr.String("k"), egressotel.ReasonAttr.String(tt.wantReason)))
			want := map[string]int64{"acquired": 0, "refused_full": 0, "refused_limit": 0, "timeout": 0, "canceled": 0, "limiter_error": 0}
			want[tt.wantResult] = 1
			results := map[string]int64{}
			for r := range want {
				results[r] = got.value(t, "egress.rate_limiting.requests", egressotel.ResultAttr.String(r))
			}
			assert.Equal(t, want, results)
		})
	}
}

func TestObserverPassesEventsOn(t *testing.T) {
	m, _ := newMetrics(t)
	var got []string
	next := &egress.Observer{
		Waited:   func(w egress.WaitInfo) { got = append(got, "waited "+w.Key) },
		Refused:  func(r egress.RefusalInfo) { got = append(got, "refused "+r.Key) },
		Retrying: func(r egress.RetryInfo) { got = append(got, "retrying "+r.Key) },
		Paused:   func(p egress.PauseInfo) { got = append(got, "paused "+p.Key) },
	}
	o := m.Observer(next)
	o.Waited(egress.WaitInfo{Key: "a", Queue: time.Millisecond})
	o.Refused(egress.RefusalInfo{Key: "b", Err: errors.New("store down")})
	o.Retrying(egress.RetryInfo{Key: "c", StatusCode: 503})
	o.Paused(egress.PauseInfo{Key: "d", Err: errors.New("store down")})
	assert.Equal(t, []string{"waited a", "refused b", "retrying c", "paused d"}, got)

	for _, n := range []*egress.Observer{nil, {}} {
		o := m.Observer(n)
		o.Waited(egress.WaitInfo{Key: "a"})
		o.Refused(egress.RefusalInfo{Key: "b", Err: queue.ErrFull})
		o.Retrying(egress.RetryInfo{Key: "c"})
		o.Paused(egress.PauseInfo{Key: "d"})
	}
}

func TestRedisObserver(t *testing.T) {
	m, reader := newMetrics(t)
	var heard []redislimit.Event
	f := m.RedisObserver(func(e redislimit.Event) { heard = append(heard, e) })
	tests := []struct {
		name       string
		give       redislimit.Event
		wantErrors int64
		wantRecov  int64
		wantOpen   int64
	}{
		{name: "failure", give: redislimit.Event{Err: errors.New("dial: refused")}, wantErrors: 1, wantOpen: 1},
		{name: "another failure", give: redislimit.Event{Err: errors.New("dial: refused"), Down: time.Second}, wantErrors: 2, wantOpen: 1},
		{name: "recovery", give: redislimit.Event{Recovered: true, Down: 2 * time.Second}, wantErrors: 2, wantRecov: 1, wantOpen: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f(tt.give)
			got := read(t, reader)
			assert.Equal(t, tt.wantErrors, got.value(t, "egress.redis.errors"))
			assert.Equal(t, tt.wantRecov, got.value(t, "egress.redis.recoveries"))
			assert.Equal(t, tt.wantOpen, got.value(t, "egress.redis.breaker.state"))
		})
	}
	assert.Len(t, heard, 3)
}

func TestPanics(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	defer func() { _ = mp.Shutdown(context.Background()) }()
	tests := []struct {
		name string
		give func()
		want string
	}{
		{name: "nil provider", give: func() { _, _ = egressotel.New(nil) }, want: "egressotel: New given a nil metric.MeterProvider"},
		{name: "nil option", give: func() { _, _ = egressotel.New(mp, nil) }, want: "egressotel: New given a nil Option at index 0"},
		{name: "negative cap", give: func() { egressotel.WithMaxKeys(-1) }, want: "egressotel: WithMaxKeys given a negative n: -1"},
		{name: "nil learner", give: func() { egressotel.WithLearnedRate(nil) }, want: "egressotel: WithLearnedRate given a nil limiter"},
		{name: "nil transport", give: func() {
			m, _ := egressotel.New(mp)
			m.Instrument(nil)
		}, want: "egressotel: Instrument given a nil *egress.Transport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.give)
		})
	}
}

// attachTo attaches m to a Transport built with opts.
func attachTo(m *egressotel.Metrics) metrictest.AttachTo {
	return func(next *egress.Observer, opts ...egress.Option) (*egress.Transport, http.RoundTripper) {
		t := egress.NewTransport(nil, append(opts, egress.WithObserver(m.Observer(next)))...)
		return t, m.Instrument(t)
	}
}
