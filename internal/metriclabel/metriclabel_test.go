package metriclabel_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/metriclabel"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

func TestSeriesBoundsHosts(t *testing.T) {
	var builds atomic.Int32
	s := metriclabel.NewSeries(metriclabel.New(nil, 1), func(k metriclabel.SeriesKey) metriclabel.SeriesKey {
		builds.Add(1)
		return k
	})
	a := metriclabel.SeriesKey{Method: "GET", Scheme: "https", Host: "a.example", Code: 200}
	b := metriclabel.SeriesKey{Method: "GET", Scheme: "https", Host: "b.example", Code: 200}
	c := metriclabel.SeriesKey{Method: "GET", Scheme: "http", Host: "c.example:8080", Code: 200}
	assert.Equal(t, a, s.Get(a))
	assert.Equal(t, metriclabel.SeriesKey{Method: "GET", Host: metriclabel.Other, Code: 200}, s.Get(b), "past the cap of 1")
	assert.Equal(t, s.Get(b), s.Get(c), "every host past the cap shares one series")
	assert.Equal(t, a, s.Get(a))
	assert.Equal(t, int32(2), builds.Load(), "each series is built once")
}

func TestCacheConcurrent(t *testing.T) {
	var builds atomic.Int32
	c := metriclabel.NewCache(func(k int) int {
		builds.Add(1)
		return k * k
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				k := (i + g) % 50
				assert.Equal(t, k*k, c.Get(k))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(50), builds.Load())
}

func TestValues(t *testing.T) {
	capped := metriclabel.New(nil, 2)
	for _, k := range []string{"a", "b", "c", "a"} {
		capped.Label(k)
	}
	got := capped.Values()
	sort.Strings(got)
	assert.Equal(t, []string{"a", "b"}, got)

	allowed := metriclabel.New([]string{"x", "y"}, 0)
	allowed.Label("z")
	got = allowed.Values()
	sort.Strings(got)
	assert.Equal(t, []string{"x", "y"}, got)
}

// option is an Option as the adapters wrap it: an interface.
type option interface{ apply(*metriclabel.Config) }

type optionFunc metriclabel.Option

func (o optionFunc) apply(c *metriclabel.Config) { o(c) }

func TestConfigure(t *testing.T) {
	c := metriclabel.Configure("pkg", []option{optionFunc(metriclabel.WithKeys([]string{"k"})), optionFunc(metriclabel.WithMaxKeys("pkg", 3))}, option.apply)
	assert.Equal(t, metriclabel.Config{Keys: []string{"k"}, MaxKeys: 3}, c)
	assert.Equal(t, metriclabel.DefaultMaxKeys, metriclabel.Configure[option]("pkg", nil, option.apply).MaxKeys)
	assert.PanicsWithValue(t, "pkg: New given a nil Option at index 1", func() {
		metriclabel.Configure("pkg", []option{optionFunc(metriclabel.WithKeys(nil)), nil}, option.apply)
	})
	assert.PanicsWithValue(t, "pkg: WithMaxKeys given a negative n: -1", func() { metriclabel.WithMaxKeys("pkg", -1) })
	assert.PanicsWithValue(t, "pkg: WithLearnedRate given a nil limiter", func() { metriclabel.WithLearnedRate("pkg", nil) })
}

// TestRedisHookFailures checks which outcomes of a round trip count as
// failures: no answer, not an error reply.
func TestRedisHookFailures(t *testing.T) {
	tests := []struct {
		name    string
		give    error
		wantErr bool
	}{
		{name: "answer", give: nil},
		{name: "nil reply", give: redis.Nil},
		{name: "error reply", give: redisReply("NOSCRIPT No matching script")},
		{name: "timeout", give: &net.OpError{Op: "read", Err: timeoutErr{}}, wantErr: true},
		{name: "closed", give: errors.New("redis: client is closed"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got error
			calls := 0
			h := metriclabel.RedisHook(func(_ context.Context, d time.Duration, err error) {
				calls++
				got = err
				assert.GreaterOrEqual(t, d, time.Duration(0))
			})
			ctx := context.Background()
			err := h.ProcessHook(func(context.Context, redis.Cmder) error { return tt.give })(ctx, redis.NewCmd(ctx, "get", "k"))
			require.Equal(t, tt.give, err, "the hook passes the error on")
			err = h.ProcessPipelineHook(func(context.Context, []redis.Cmder) error { return tt.give })(ctx, nil)
			require.Equal(t, tt.give, err)
			assert.Equal(t, 2, calls, "one round trip each")
			assert.Equal(t, tt.wantErr, got != nil)
		})
	}
}

type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// idleBase counts CloseIdleConnections.
type idleBase struct {
	metrictest.MemBase
	idles atomic.Int32
}

func (b *idleBase) CloseIdleConnections() { b.idles.Add(1) }

func TestInstrumentForwardsCloseIdleConnections(t *testing.T) {
	base := &idleBase{}
	c := metriclabel.NewCore("pkg", metriclabel.Config{})
	rt := c.Instrument(egress.NewTransport(base))
	rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	assert.Equal(t, int32(1), base.idles.Load())
	assert.PanicsWithValue(t, "pkg: Instrument given a nil *egress.Transport", func() { c.Instrument(nil) })
}

func TestRefusedUnsent(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://api.example/", nil)
	require.NoError(t, err)
	tests := []struct {
		name string
		give egress.RefusalInfo
		want bool
	}{
		{name: "queue full", give: egress.RefusalInfo{Attempt: 1, Request: req, Err: queue.ErrFull}, want: true},
		{name: "limit", give: egress.RefusalInfo{Attempt: 1, Request: req, Err: &throttle.LimitError{Key: "k"}}, want: true},
		{name: "a retry's", give: egress.RefusalInfo{Attempt: 2, Request: req, Err: queue.ErrFull}},
		{name: "limiter error", give: egress.RefusalInfo{Attempt: 1, Request: req, Err: errors.New("store down")}},
		{name: "no request", give: egress.RefusalInfo{Attempt: 1, Err: queue.ErrFull}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, metriclabel.RefusedUnsent(tt.give))
		})
	}
}
