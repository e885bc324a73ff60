package middleware_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// quota is retryafter.Quota with the fields a test states.
func quota(name string, limit, remaining int, reset, window time.Duration) retryafter.Quota {
	return retryafter.Quota{Name: name, Limit: limit, Remaining: remaining, Reset: reset, Window: window}
}

// TestHeadersReadByEgress checks that egress's own parser reads exactly
// what the middleware meant, for each kind of limit, after a few requests
// a known time into a window.
func TestHeadersReadByEgress(t *testing.T) {
	tests := []struct {
		name      string
		give      func() throttle.Limiter
		giveSends int
		wantField string
		want      []retryafter.Quota
	}{
		{
			name:      "token bucket",
			give:      func() throttle.Limiter { return must(throttle.NewTokenBucket(throttle.PerSecond(10), 20)) },
			giveSends: 5,
			wantField: `"bucket";r=15;t=1`,
			want:      []retryafter.Quota{quota("bucket", 20, 15, time.Second, 2*time.Second)},
		},
		{
			name:      "token bucket, minutes",
			give:      func() throttle.Limiter { return must(throttle.NewTokenBucket(throttle.PerMinute(600), 600)) },
			giveSends: 600,
			wantField: `"bucket";r=0;t=60`,
			want:      []retryafter.Quota{quota("bucket", 600, 0, time.Minute, time.Minute)},
		},
		{
			name:      "fixed window",
			give:      func() throttle.Limiter { return must(throttle.NewFixedWindow(100, 24*time.Hour)) },
			giveSends: 3,
			wantField: `"fixed";r=97;t=79200`, // 2h into the day
			want:      []retryafter.Quota{quota("fixed", 100, 97, 22*time.Hour, 24*time.Hour)},
		},
		{
			name:      "sliding window",
			give:      func() throttle.Limiter { return must(throttle.NewSlidingWindow(10, time.Minute)) },
			giveSends: 4,
			wantField: `"sliding";r=6;t=60`,
			want:      []retryafter.Quota{quota("sliding", 10, 6, time.Minute, time.Minute)},
		},
		{
			name:      "sliding window counter",
			give:      func() throttle.Limiter { return must(throttle.NewSlidingWindowCounter(10, time.Minute)) },
			giveSends: 4,
			wantField: `"sliding";r=6;t=60`, // to the end of its window
			want:      []retryafter.Quota{quota("sliding", 10, 6, time.Minute, time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(2 * time.Hour) // the bubble starts at midnight UTC
				h := middleware.New(tt.give()).Wrap(okHandler)
				var resp *http.Response
				for range tt.giveSends {
					resp = get(h, "203.0.113.7:1")
					require.Equal(t, http.StatusOK, resp.StatusCode)
				}
				assert.Equal(t, tt.wantField, resp.Header.Get("RateLimit"))
				assertStructured(t, resp.Header)
				now := time.Now()
				for i := range tt.want { // delta-seconds: the reset is now + Reset, to the second
					tt.want[i].ResetAt, tt.want[i].Precision = now.Add(tt.want[i].Reset), time.Second
				}
				assert.Equal(t, tt.want, retryafter.ParseQuota(resp.Header, now))
			})
		})
	}
}

// assertStructured checks that both fields are valid Structured Field
// Lists, as the draft requires.
func assertStructured(t *testing.T, h http.Header) {
	t.Helper()
	for _, name := range []string{"RateLimit", "RateLimit-Policy"} {
		require.NotEmpty(t, h.Values(name), name)
		l, err := httpsfv.UnmarshalList(h.Values(name))
		require.NoError(t, err, name)
		v, err := httpsfv.Marshal(l)
		require.NoError(t, err)
		assert.Equal(t, strings.Join(h.Values(name), ", "), v, "%s is in canonical form", name)
	}
}

func TestRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 1 per 1.5 s: the refusal's delay is not a whole number of seconds.
		l := must(throttle.NewTokenBucket(throttle.Rate{N: 2, Per: 3 * time.Second}, 1))
		h := middleware.New(l).Wrap(okHandler)
		require.Equal(t, http.StatusOK, get(h, "203.0.113.7:1").StatusCode)
		time.Sleep(100 * time.Millisecond)

		resp := get(h, "203.0.113.7:1")
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "2", resp.Header.Get("Retry-After"), "1.4 s rounds up")
		assert.Equal(t, `"bucket";r=0;t=2`, resp.Header.Get("RateLimit"))
		d, ok := retryafter.Parse(resp.Header, time.Now())
		require.True(t, ok)
		assert.Equal(t, 2*time.Second, d)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "middleware: rate limit exceeded\n", string(body))

		time.Sleep(d)
		assert.Equal(t, http.StatusOK, get(h, "203.0.113.7:1").StatusCode, "waiting Retry-After admits")
	})
}

func TestKeys(t *testing.T) {
	tests := []struct {
		name       string
		giveRemote string
		giveHeader []string
		wantStatus int
		wantBody   string
		wantSpent  string // the key whose budget the request took
	}{
		{name: "API key", giveRemote: "203.0.113.7:1", giveHeader: []string{"X-Api-Key", "k1"}, wantStatus: 200, wantSpent: "api"},
		{name: "no API key: by IP", giveRemote: "203.0.113.7:1", wantStatus: 200, wantSpent: "ip:203.0.113.7"},
		{name: "nothing to key by: the shared unknown key", giveRemote: "pipe", wantStatus: 200, wantSpent: "ip:unknown"},
		{
			name: "API key too long", giveRemote: "203.0.113.7:1", giveHeader: []string{"X-Api-Key", strings.Repeat("k", 1025)},
			wantStatus: 400, wantBody: "middleware: key too long: header X-Api-Key is 1025 bytes, longer than MaxKeyLen (1024)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := must(throttle.NewFixedWindow(5, time.Hour))
			h := middleware.New(l, middleware.WithKey(middleware.KeyByHeader("X-Api-Key"))).Wrap(okHandler)
			resp := get(h, tt.giveRemote, tt.giveHeader...)
			require.Equal(t, tt.wantStatus, resp.StatusCode)
			if tt.wantBody != "" {
				body, _ := io.ReadAll(resp.Body)
				assert.Equal(t, tt.wantBody, string(body))
				return
			}
			spent := tt.wantSpent
			if spent == "api" {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("X-Api-Key", "k1")
				spent, _ = middleware.KeyByHeader("X-Api-Key")(req)
			}
			r, err := l.Reserve(context.Background(), spent, 1, 0)
			require.NoError(t, err)
			assert.Equal(t, 3, r.Remaining, "the request took a unit of %q", spent)
		})
	}
}

// errLimiter fails every Reserve, as a limiter that fails closed does when
// Redis is down.
type errLimiter struct{}

func (errLimiter) Reserve(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
	return nil, errors.New("redislimit: unavailable")
}

// openLimiter grants everything, as FailOpen does while Redis is down.
type openLimiter struct{}

func (openLimiter) Reserve(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
	return &throttle.Reservation{OK: true}, nil
}

func TestDegraded(t *testing.T) {
	tests := []struct {
		name         string
		give         throttle.Limiter
		giveDown     bool
		wantStatus   int
		wantDegraded string
	}{
		{name: "fails closed", give: errLimiter{}, wantStatus: 503, wantDegraded: "closed"},
		{name: "fails open", give: openLimiter{}, giveDown: true, wantStatus: 200, wantDegraded: "open"},
		{name: "store up", give: openLimiter{}, giveDown: false, wantStatus: 200, wantDegraded: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := middleware.New(tt.give, middleware.WithDegraded(func() bool { return tt.giveDown })).Wrap(okHandler)
			resp := get(h, "203.0.113.7:1")
			assert.Equal(t, tt.wantStatus, resp.StatusCode)
			assert.Equal(t, tt.wantDegraded, resp.Header.Get(middleware.HeaderDegraded))
			assert.Empty(t, resp.Header.Values("RateLimit"), "nothing known, nothing stated")
		})
	}
}

func TestCost(t *testing.T) {
	tests := []struct {
		name       string
		giveCost   int
		wantStatus int
		wantRetry  string
		wantField  string
	}{
		{name: "within the burst", giveCost: 4, wantStatus: 200, wantField: `"bucket";r=6;t=1`},
		{name: "more than the burst: waiting cannot help", giveCost: 11, wantStatus: 429, wantRetry: "", wantField: `"bucket";r=10;t=0`}, // the budget is whole: its cost refused it
		{name: "below 1", giveCost: 0, wantStatus: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := must(throttle.NewTokenBucket(throttle.PerSecond(10), 10))
			h := middleware.New(l, middleware.WithCost(func(*http.Request) int { return tt.giveCost })).Wrap(okHandler)
			resp := get(h, "203.0.113.7:1")
			assert.Equal(t, tt.wantStatus, resp.StatusCode)
			assert.Equal(t, tt.wantRetry, resp.Header.Get("Retry-After"))
			assert.Equal(t, tt.wantField, resp.Header.Get("RateLimit"))
		})
	}
}

func TestXRateLimit(t *testing.T) {
	tests := []struct {
		name      string
		giveStyle middleware.ResetStyle
		wantReset string
	}{
		{name: "delta", giveStyle: middleware.ResetDelta, wantReset: "79201"},      // 22h0m0.3s, rounded up
		{name: "epoch", giveStyle: middleware.ResetEpoch, wantReset: "1772496000"}, // 2026-03-03 00:00 UTC
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// 01:59:59.7 UTC, late enough for an epoch of 1e9 or more.
				time.Sleep(time.Until(time.Date(2026, 3, 2, 2, 0, 0, 0, time.UTC).Add(-300 * time.Millisecond)))
				l := must(throttle.NewFixedWindow(100, 24*time.Hour))
				h := middleware.New(l, middleware.WithXRateLimit(tt.giveStyle)).Wrap(okHandler)
				resp := get(h, "203.0.113.7:1")
				assert.Equal(t, "100", resp.Header.Get("X-RateLimit-Limit"))
				assert.Equal(t, "99", resp.Header.Get("X-RateLimit-Remaining"))
				assert.Equal(t, tt.wantReset, resp.Header.Get("X-RateLimit-Reset"))
				resp.Header.Del("RateLimit") // read the X- fields alone
				resp.Header.Del("RateLimit-Policy")
				qs := retryafter.ParseQuota(resp.Header, time.Now())
				require.Len(t, qs, 1)
				assert.Equal(t, 99, qs[0].Remaining)
				assert.Equal(t, 100, qs[0].Limit)
				assert.GreaterOrEqual(t, qs[0].Reset, 22*time.Hour-300*time.Millisecond, "never earlier than the true reset")
				assert.LessOrEqual(t, qs[0].Reset, 22*time.Hour+time.Second)
			})
		})
	}
}

func TestTiers(t *testing.T) {
	synctest.Test(t, testTiers)
}

func testTiers(t *testing.T) {
	free := must(throttle.NewFixedWindow(100, 24*time.Hour))
	pro := must(throttle.NewTokenBucket(throttle.PerMinute(600), 600))
	burst := must(throttle.NewTokenBucket(throttle.PerSecond(50), 50))
	daily := must(throttle.NewFixedWindow(10_000, 24*time.Hour))
	enterprise := throttle.All(burst, daily)
	policies := map[string]*middleware.Policies{
		"user:free": middleware.Describe(free),
		"user:pro":  middleware.Describe(pro),
		"user:ent":  middleware.Describe(burst, daily),
	}
	pick := func(key string) throttle.Limiter {
		switch key {
		case "user:pro":
			return pro
		case "user:ent":
			return enterprise
		}
		return free
	}
	h := middleware.New(throttle.Route(pick),
		middleware.WithKey(middleware.KeyByUser(func(r *http.Request) string { return r.Header.Get("User") })),
		middleware.WithPolicies(func(key string) *middleware.Policies { return policies[key] }),
	).Wrap(okHandler)

	tests := []struct {
		name       string
		giveUser   string
		giveSends  int
		wantPolicy string
		wantField  string
	}{
		{name: "free", giveUser: "free", giveSends: 1, wantPolicy: `"fixed";q=100;w=86400`},
		{name: "pro", giveUser: "pro", giveSends: 1, wantPolicy: `"bucket";q=600;w=60`, wantField: `"bucket";r=599;t=1`},
		{name: "enterprise", giveUser: "ent", giveSends: 1, wantPolicy: `"bucket";q=50;w=1, "fixed";q=10000;w=86400`},
		{name: "enterprise again", giveUser: "ent", giveSends: 48, wantPolicy: `"bucket";q=50;w=1, "fixed";q=10000;w=86400`, wantField: `"bucket";r=1;t=1, "fixed";r=1;t=` + secondsToMidnight()},
		{name: "anonymous: by IP, on the free tier", giveUser: "", giveSends: 1, wantPolicy: ""},
	}
	// The steps share the limiters and the bubble's clock, so they run in
	// order without subtests (which a bubble does not allow).
	for _, tt := range tests {
		var resp *http.Response
		for range tt.giveSends {
			resp = get(h, "203.0.113.7:1", "User", tt.giveUser)
			require.Equal(t, http.StatusOK, resp.StatusCode, tt.name)
		}
		assert.Equal(t, tt.wantPolicy, resp.Header.Get("RateLimit-Policy"), tt.name)
		if tt.wantField != "" {
			assert.Equal(t, tt.wantField, resp.Header.Get("RateLimit"), tt.name)
		}
		if tt.wantPolicy != "" {
			assertStructured(t, resp.Header)
		}
	}

	{ // enterprise, burst spent
		require.Equal(t, http.StatusOK, get(h, "203.0.113.7:1", "User", "ent").StatusCode) // the 50th
		resp := get(h, "203.0.113.7:1", "User", "ent")                                     // the 51st: refused
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		d, ok := retryafter.Parse(resp.Header, time.Now())
		require.True(t, ok)
		assert.Equal(t, time.Second, d, "Retry-After, exact for All, comes before t")
	}
}

// secondsToMidnight is t of a daily fixed window now, as the middleware
// states it.
func secondsToMidnight() string {
	now := time.Now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	return strconv.FormatInt(int64((midnight.Sub(now)+time.Second-1)/time.Second), 10)
}

func TestMaxWait(t *testing.T) {
	t.Run("held until the slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := must(throttle.NewTokenBucket(throttle.PerSecond(2), 1))
			h := middleware.New(l, middleware.WithMaxWait(time.Second)).Wrap(okHandler)
			start := time.Now()
			statuses := []int{get(h, "203.0.113.7:1").StatusCode, get(h, "203.0.113.7:1").StatusCode, get(h, "203.0.113.7:1").StatusCode}
			assert.Equal(t, []int{200, 200, 200}, statuses)
			assert.Equal(t, time.Second, time.Since(start), "the 2nd and 3rd were held 0.5 s each")
			resp := get(h, "203.0.113.7:1")
			assert.Equal(t, 200, resp.StatusCode)
		})
	})
	t.Run("refused beyond the max wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := must(throttle.NewTokenBucket(throttle.PerMinute(1), 1))
			h := middleware.New(l, middleware.WithMaxWait(time.Second)).Wrap(okHandler)
			require.Equal(t, 200, get(h, "203.0.113.7:1").StatusCode)
			resp := get(h, "203.0.113.7:1")
			assert.Equal(t, 429, resp.StatusCode)
			assert.Equal(t, "59", resp.Header.Get("Retry-After"), "its slot comes within the max wait after 59 s")
		})
	})
	t.Run("a client that leaves gives its slot back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := must(throttle.NewTokenBucket(throttle.PerSecond(1), 1))
			h := middleware.New(l, middleware.WithMaxWait(10*time.Second)).Wrap(okHandler)
			require.Equal(t, 200, get(h, "203.0.113.7:1").StatusCode)

			ctx, cancel := context.WithCancel(context.Background())
			req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil).WithContext(ctx)
			req.RemoteAddr = "203.0.113.7:1"
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() { h.ServeHTTP(rec, req); close(done) }()
			synctest.Wait()
			cancel()
			<-done
			assert.Equal(t, http.StatusServiceUnavailable, rec.Code)

			time.Sleep(time.Second)
			r, err := l.Reserve(context.Background(), "ip:203.0.113.7", 1, 0)
			require.NoError(t, err)
			assert.True(t, r.OK, "the held unit came back")
		})
	})
}

func TestNewPanicsOnProgrammerErrors(t *testing.T) {
	l := must(throttle.NewTokenBucket(throttle.PerSecond(1), 1))
	tests := []struct {
		name string
		give func()
		want string
	}{
		{name: "nil limiter", give: func() { middleware.New(nil) }, want: "middleware: New given a nil Limiter"},
		{name: "nil option", give: func() { middleware.New(l, nil) }, want: "middleware: New given a nil Option (#0)"},
		{name: "nil key", give: func() { middleware.WithKey(nil) }, want: "middleware: WithKey given a nil KeyFunc"},
		{name: "nil fallback", give: func() { middleware.WithFallback(nil) }, want: "middleware: WithFallback given a nil KeyFunc"},
		{name: "nil cost", give: func() { middleware.WithCost(nil) }, want: "middleware: WithCost given a nil func"},
		{name: "zero wait", give: func() { middleware.WithMaxWait(0) }, want: "middleware: WithMaxWait must be positive, got 0s"},
		{name: "nil policies", give: func() { middleware.WithPolicies(nil) }, want: "middleware: WithPolicies given a nil func"},
		{name: "no reset style", give: func() { middleware.WithXRateLimit(0) }, want: "middleware: WithXRateLimit given an unknown ResetStyle 0"},
		{name: "nil degraded", give: func() { middleware.WithDegraded(nil) }, want: "middleware: WithDegraded given a nil func"},
		{name: "nil handler", give: func() { middleware.New(l).Wrap(nil) }, want: "middleware: Wrap given a nil Handler"},
		{name: "describe nothing", give: func() { middleware.Describe() }, want: "middleware: Describe given no Limiter"},
		{name: "describe a leaky bucket", give: func() { middleware.Describe(must(throttle.NewLeakyBucket(throttle.PerSecond(1), 1))) },
			want: "middleware: Describe cannot describe a *throttle.LeakyBucket: give it token buckets and windows from throttle or redislimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.give)
		})
	}
}

// TestUndescribed checks that a limiter the middleware cannot see into
// gets no policy headers, only a Retry-After after which it admits.
func TestUndescribed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := must(throttle.NewLeakyBucket(throttle.Rate{N: 1, Per: 2500 * time.Millisecond}, 2))
		h := middleware.New(l).Wrap(okHandler)
		resp := get(h, "203.0.113.7:1")
		for i := 0; resp.StatusCode == http.StatusOK && i < 10; i++ {
			assert.Empty(t, resp.Header.Values("RateLimit"))
			assert.Empty(t, resp.Header.Values("RateLimit-Policy"))
			resp = get(h, "203.0.113.7:1")
		}
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Empty(t, resp.Header.Values("RateLimit"))
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		require.NoError(t, err)
		assert.Equal(t, 3, secs, "2.5 s, rounded up")
		time.Sleep(time.Duration(secs) * time.Second)
		assert.Equal(t, http.StatusOK, get(h, "203.0.113.7:1").StatusCode)
	})
}

// TestZeroPolicies: a zero Policies (new(middleware.Policies), or a
// Policies{} literal, which the type allows) states no limit, as nil does.
// The middleware indexed the first byte of an empty RateLimit field and
// panicked on every request, which net/http turns into a dropped
// connection.
func TestZeroPolicies(t *testing.T) {
	for _, style := range []middleware.ResetStyle{0, middleware.ResetDelta} {
		opts := []middleware.Option{middleware.WithPolicies(func(string) *middleware.Policies { return new(middleware.Policies) })}
		if style != 0 {
			opts = append(opts, middleware.WithXRateLimit(style))
		}
		l := must(throttle.NewTokenBucket(throttle.PerSecond(1), 1))
		h := middleware.New(l, opts...).Wrap(okHandler)
		var resp *http.Response
		require.NotPanics(t, func() { resp = get(h, "203.0.113.7:1") })
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Empty(t, resp.Header.Values("RateLimit"))
		assert.Empty(t, resp.Header.Values("RateLimit-Policy"))
		require.NotPanics(t, func() { resp = get(h, "203.0.113.7:1") })
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
}
