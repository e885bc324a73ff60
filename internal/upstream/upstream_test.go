package upstream

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/egress-go/egress/internal/sendtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a fake clock the tests move by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newFake returns a Server on a fake clock that starts at 12:00:00.000
// UTC, with no listener: tests call serve directly.
func newFake(cfg Config) (*Server, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := &Server{now: c.now}
	s.Reset(cfg)
	return s, c
}

// do sends one request to s, stamped as sent at sentAt when that is not
// zero, and returns the response.
func do(s *Server, sentAt time.Time) *http.Response {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if !sentAt.IsZero() {
		req.Header.Set(sendtime.Header, strconv.FormatInt(sentAt.UnixNano(), 10))
	}
	w := httptest.NewRecorder()
	s.serve(w, req)
	return w.Result()
}

// step is one request, sent after moving the fake clock by after.
type step struct {
	after          time.Duration
	wantStatus     int
	wantRetryAfter string
}

func TestAlgorithms(t *testing.T) {
	ok := func(after time.Duration) step { return step{after: after, wantStatus: http.StatusOK} }
	no := func(after time.Duration, retryAfter string) step {
		return step{after: after, wantStatus: http.StatusTooManyRequests, wantRetryAfter: retryAfter}
	}
	tests := []struct {
		name      string
		giveCfg   Config
		giveSteps []step
	}{
		{
			name:    "token bucket: burst at once, then one per interval",
			giveCfg: Config{Rate: 1, Burst: 3},
			giveSteps: []step{ok(0), ok(0), ok(0), no(0, "1"), ok(time.Second), no(0, "1"),
				no(999*time.Millisecond, "1"), ok(time.Millisecond)},
		},
		{
			name:    "leaky bucket: 1+burst at once, nginx's whole milliseconds",
			giveCfg: Config{Algorithm: LeakyBucket, Rate: 48, Burst: 8},
			giveSteps: []step{ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), ok(0), no(0, "1"),
				no(20*time.Millisecond, "1"), ok(time.Millisecond), no(0, "1")},
		},
		{
			name:    "leaky bucket: burst 0 admits one at a time",
			giveCfg: Config{Algorithm: LeakyBucket, Rate: 10, Burst: 0},
			giveSteps: []step{ok(0), no(0, "1"), no(99*time.Millisecond, "1"), ok(time.Millisecond),
				ok(time.Hour), no(0, "1")},
		},
		{
			name:    "sliding log: any window",
			giveCfg: Config{Algorithm: SlidingLog, Limit: 2, Window: time.Second},
			giveSteps: []step{ok(0), ok(500 * time.Millisecond), no(400*time.Millisecond, "1"),
				ok(100 * time.Millisecond), no(400*time.Millisecond, "1"), ok(100 * time.Millisecond)},
		},
		{
			name:    "fixed window: resets at its boundary",
			giveCfg: Config{Algorithm: FixedWindow, Limit: 2, Window: time.Second},
			giveSteps: []step{ok(0), ok(0), no(0, "1"), no(999*time.Millisecond, "1"),
				ok(time.Millisecond), ok(0), no(0, "1")},
		},
		{
			name:      "daily quota",
			giveCfg:   Config{Rate: 100, Burst: 100, Quota: 2, Day: time.Hour},
			giveSteps: []step{ok(0), ok(0), no(0, "3600"), ok(time.Hour)},
		},
		{
			name:    "throttle at the second request",
			giveCfg: Config{Rate: 100, Burst: 100, ThrottleAt: 2, ThrottleFor: 1500 * time.Millisecond},
			giveSteps: []step{ok(0), no(0, "2"), no(1499*time.Millisecond, "1"),
				ok(time.Millisecond), ok(0)},
		},
		{
			name:      "503 without Retry-After",
			giveCfg:   Config{Rate: 1, Burst: 1, Status: http.StatusServiceUnavailable, NoRetryAfter: true},
			giveSteps: []step{ok(0), {wantStatus: http.StatusServiceUnavailable}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newFake(tt.giveCfg)
			for i, st := range tt.giveSteps {
				c.t = c.t.Add(st.after)
				resp := do(s, time.Time{})
				assert.Equal(t, st.wantStatus, resp.StatusCode, "step %d", i)
				assert.Equal(t, st.wantRetryAfter, resp.Header.Get("Retry-After"), "step %d", i)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		name     string
		giveCfg  Config
		giveSend int // requests before the one whose headers are read
		want     http.Header
	}{
		{
			name:    "none for a rate limit by default",
			giveCfg: Config{Rate: 1, Burst: 3},
			want:    http.Header{},
		},
		{
			name:     "quota",
			giveCfg:  Config{Rate: 100, Burst: 100, Quota: 5, Day: time.Hour},
			giveSend: 1,
			want:     http.Header{"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"3"}, "X-Ratelimit-Reset": {"3600"}},
		},
		{
			name:     "X-RateLimit for a token bucket",
			giveCfg:  Config{Rate: 1, Burst: 3, Headers: XRateLimitHeaders},
			giveSend: 1,
			want:     http.Header{"X-Ratelimit-Limit": {"3"}, "X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"2"}},
		},
		{
			name:     "X-RateLimit for a leaky bucket",
			giveCfg:  Config{Algorithm: LeakyBucket, Rate: 1, Burst: 2, Headers: XRateLimitHeaders},
			giveSend: 1,
			want:     http.Header{"X-Ratelimit-Limit": {"3"}, "X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"1"}},
		},
		{
			name:     "IETF for a fixed window",
			giveCfg:  Config{Algorithm: FixedWindow, Limit: 10, Window: time.Minute, Headers: IETFHeaders},
			giveSend: 3,
			want:     http.Header{"Ratelimit-Policy": {`"default";q=10;w=60`}, "Ratelimit": {`"default";r=6;t=60`}},
		},
		{
			name:     "IETF for a sliding log",
			giveCfg:  Config{Algorithm: SlidingLog, Limit: 2, Window: time.Second, Headers: IETFHeaders},
			giveSend: 2,
			want: http.Header{"Ratelimit-Policy": {`"default";q=2;w=1`}, "Ratelimit": {`"default";r=0;t=1`},
				"Retry-After": {"1"}},
		},
		{
			name:     "none",
			giveCfg:  Config{Algorithm: FixedWindow, Limit: 1, Window: time.Minute, Headers: NoHeaders, NoRetryAfter: true},
			giveSend: 1,
			want:     http.Header{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newFake(tt.giveCfg)
			for range tt.giveSend {
				do(s, time.Time{})
			}
			h := do(s, time.Time{}).Header
			h.Del("Content-Type")
			assert.Equal(t, tt.want, h)
		})
	}
}

func TestStats(t *testing.T) {
	s, c := newFake(Config{Rate: 1, Burst: 10, ThrottleAt: 2, ThrottleFor: time.Hour})
	start := c.t
	do(s, time.Time{}) // admitted
	c.t = c.t.Add(time.Millisecond)
	do(s, time.Time{}) // the 429 that starts the pause
	c.t = c.t.Add(time.Millisecond)
	do(s, start) // in flight before that 429 left: not counted
	c.t = c.t.Add(time.Millisecond)
	do(s, start.Add(3*time.Millisecond)) // sent after the last refusal left: counted
	do(s, time.Time{})                   // unstamped: not counted
	st := s.Stats()
	assert.Equal(t, 1, st.Admitted)
	assert.Equal(t, 4, st.Refused)
	assert.Equal(t, 1, st.DuringPause)
	assert.Equal(t, []time.Time{start}, st.Arrivals)
	assert.Equal(t, 4, s.TooMany())
	require.Len(t, s.Arrivals(), 5)
	assert.Equal(t, start.Add(3*time.Millisecond).UnixNano(), s.Arrivals()[3].SentAt.UnixNano())

	s.Reset(Config{Rate: 1, Burst: 1})
	assert.Equal(t, Stats{}, s.Stats())
	assert.Empty(t, s.Arrivals())
	assert.Equal(t, http.StatusOK, do(s, time.Time{}).StatusCode)
}

func TestServer(t *testing.T) {
	s := New(Config{Rate: 1000, Burst: 1000, Quota: 1, Day: time.Hour, Cost: func(*http.Request) int { return 1 }})
	defer s.Close()
	client := &http.Client{Transport: Stamp(nil)}
	defer client.CloseIdleConnections()
	require.NoError(t, Get(t.Context(), client, s.URL()))
	assert.ErrorContains(t, Get(t.Context(), client, s.URL()), "429 Too Many Requests")
	arrivals := s.Arrivals()
	require.Len(t, arrivals, 2)
	assert.False(t, arrivals[1].SentAt.IsZero())
}

func TestFront(t *testing.T) {
	n := 0
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n++; n%2 == 0 {
			w.Header().Set("Retry-After", "Thu, 01 Jan 2026 13:00:00 GMT")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	s, c := newFake(Config{Front: front})
	start := c.t
	assert.Equal(t, http.StatusOK, do(s, time.Time{}).StatusCode)
	assert.Equal(t, http.StatusTooManyRequests, do(s, time.Time{}).StatusCode)
	c.t = c.t.Add(time.Minute)
	assert.Equal(t, http.StatusOK, do(s, start.Add(time.Second)).StatusCode) // sent after the 429, within its hour
	st := s.Stats()
	assert.Equal(t, 2, st.Admitted)
	assert.Equal(t, 1, st.Refused)
	assert.Equal(t, 1, st.DuringPause)
}
