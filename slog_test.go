package egress_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// logBuffer collects the JSON records of a slog handler; it is safe for
// concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records returns every record logged, without its time.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		delete(rec, slog.TimeKey)
		out = append(out, rec)
	}
	return out
}

func newLogBuffer(level slog.Level) (*logBuffer, *slog.Logger) {
	b := &logBuffer{}
	return b, slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level}))
}

func TestHashKey(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "api.example.com", want: "d0c43d3885064d9a"},
		{give: "", want: "e3b0c44298fc1c14"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, egress.HashKey(tt.give))
		})
	}
}

func TestSlogObserver(t *testing.T) {
	const key = "tenant-secret-42"
	hash := egress.HashKey(key)
	tests := []struct {
		name string
		give func(o *egress.Observer)
		want map[string]any
	}{
		{
			name: "queue full",
			give: func(o *egress.Observer) {
				o.Refused(egress.RefusalInfo{Key: key, Attempt: 1, Err: fmt.Errorf("wrapped: %w", queue.ErrFull)})
			},
			want: map[string]any{"level": "WARN", "msg": "egress: request refused: queue full", "key_hash": hash, "attempt": 1.0},
		},
		{
			name: "limit exceeded",
			give: func(o *egress.Observer) {
				o.Refused(egress.RefusalInfo{Key: key, Attempt: 2, Err: &throttle.LimitError{Key: key, RetryAfter: 1500 * time.Millisecond, Deadline: true}})
			},
			want: map[string]any{"level": "WARN", "msg": "egress: request refused: limit exceeded", "key_hash": hash, "attempt": 2.0, "retry_after": 1.5e9, "deadline": true},
		},
		{
			name: "limiter failed, quoting the key",
			give: func(o *egress.Observer) {
				o.Refused(egress.RefusalInfo{Key: key, Attempt: 1, Err: errors.New(`store: key "` + key + `" unavailable`)})
			},
			want: map[string]any{"level": "ERROR", "msg": "egress: request refused: limiter failed", "key_hash": hash, "attempt": 1.0, "error": `store: key "#` + hash + `" unavailable`},
		},
		{
			name: "limiter failed, quoting a short key",
			give: func(o *egress.Observer) {
				o.Refused(egress.RefusalInfo{Key: "a", Attempt: 1, Err: errors.New(`store: key "a" unavailable`)})
			},
			want: map[string]any{"level": "ERROR", "msg": "egress: request refused: limiter failed", "key_hash": egress.HashKey("a"), "attempt": 1.0, "error": `store: key "#` + egress.HashKey("a") + `" unavailable`},
		},
		{
			name: "retry",
			give: func(o *egress.Observer) {
				o.Retrying(egress.RetryInfo{Key: key, Attempt: 1, StatusCode: 429, Delay: time.Second})
			},
			want: map[string]any{"level": "INFO", "msg": "egress: retrying request", "key_hash": hash, "attempt": 1.0, "status": 429.0, "delay": 1e9},
		},
		{
			name: "pause",
			give: func(o *egress.Observer) {
				o.Paused(egress.PauseInfo{Key: key, StatusCode: 503, Duration: 2 * time.Second})
			},
			want: map[string]any{"level": "WARN", "msg": "egress: key paused", "key_hash": hash, "status": 503.0, "duration": 2e9},
		},
		{
			name: "pause failed",
			give: func(o *egress.Observer) {
				o.Paused(egress.PauseInfo{Key: key, StatusCode: 429, Duration: time.Second, Err: errors.New("redis: timeout")})
			},
			want: map[string]any{"level": "ERROR", "msg": "egress: pausing key failed", "key_hash": hash, "status": 429.0, "duration": 1e9, "error": "redis: timeout"},
		},
		{
			name: "waited",
			give: func(o *egress.Observer) {
				o.Waited(egress.WaitInfo{Key: key, Attempt: 1, Queue: time.Millisecond, Limiter: 2 * time.Millisecond})
			},
			want: map[string]any{"level": "DEBUG", "msg": "egress: request waited", "key_hash": hash, "attempt": 1.0, "queue": 1e6, "limiter": 2e6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf, logger := newLogBuffer(slog.LevelDebug)
			tt.give(egress.NewSlogObserver(logger))
			assert.Equal(t, []map[string]any{tt.want}, buf.records(t))
			assert.NotContains(t, buf.String(), key)
		})
	}
}

func TestSlogObserverSkipsWaitsAboveDebug(t *testing.T) {
	buf, logger := newLogBuffer(slog.LevelInfo)
	egress.NewSlogObserver(logger).Waited(egress.WaitInfo{Key: "k", Attempt: 1, Limiter: time.Second})
	assert.Empty(t, buf.String())
}

func TestSlogRedisLogger(t *testing.T) {
	tests := []struct {
		name          string
		giveErr       error
		giveRecovered bool
		giveDown      time.Duration
		want          []map[string]any
	}{
		{
			name: "failure", giveErr: errors.New("dial tcp 127.0.0.1:1: connection refused"), giveDown: 250 * time.Millisecond,
			want: []map[string]any{{"level": "ERROR", "msg": "egress: redis call failed", "error": "dial tcp 127.0.0.1:1: connection refused", "down": 2.5e8}},
		},
		{
			name: "recovery", giveRecovered: true, giveDown: 3 * time.Second,
			want: []map[string]any{{"level": "INFO", "msg": "egress: redis recovered", "down": 3e9}},
		},
		{name: "nothing to say"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf, logger := newLogBuffer(slog.LevelDebug)
			egress.NewSlogRedisLogger(logger)(tt.giveErr, tt.giveRecovered, tt.giveDown)
			assert.Equal(t, tt.want, buf.records(t))
		})
	}
}

func TestSlogNilLoggerPanics(t *testing.T) {
	assert.PanicsWithValue(t, "egress: NewSlogObserver given a nil *slog.Logger", func() { egress.NewSlogObserver(nil) })
	assert.PanicsWithValue(t, "egress: NewSlogRedisLogger given a nil *slog.Logger", func() { egress.NewSlogRedisLogger(nil) })
}

// TestSlogObserverThroughTransport sends a request keyed by an API key
// through a Transport whose upstream answers 429 once, and checks what is
// logged: the retry and the pause, and never the API key, the key or a
// body.
func TestSlogObserverThroughTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const secret = "Bearer sk-live-very-secret"
		var calls int
		base := slogBase(func(req *http.Request) *http.Response {
			calls++
			if calls == 1 {
				return slogResponse(req, http.StatusTooManyRequests, "slow down, body secret", "Retry-After", "1")
			}
			return slogResponse(req, http.StatusOK, "ok", "X-Echo", req.Header.Get("Authorization"))
		})
		buf, logger := newLogBuffer(slog.LevelDebug)
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 1)
		require.NoError(t, err)
		tr := egress.NewTransport(base,
			egress.WithLimiter(tb),
			egress.WithKey(egress.KeyByHeader("Authorization")),
			egress.WithRetry(retryafter.Policy{Jitter: func(time.Duration) time.Duration { return 0 }}),
			egress.WithObserver(egress.NewSlogObserver(logger)))

		req, err := http.NewRequest(http.MethodGet, "http://api.test/v1", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", secret)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)

		key := egress.KeyByHeader("Authorization")(req)
		hash := egress.HashKey(key)
		var msgs []string
		for _, rec := range buf.records(t) {
			msgs = append(msgs, rec["msg"].(string))
			assert.Equal(t, hash, rec["key_hash"])
		}
		assert.Equal(t, []string{"egress: key paused", "egress: retrying request", "egress: request waited"}, msgs)
		for _, leak := range []string{secret, "sk-live", key, "body secret"} {
			assert.NotContains(t, buf.String(), leak)
		}
	})
}

// slogBase adapts a func to http.RoundTripper, closing request bodies.
type slogBase func(*http.Request) *http.Response

func (f slogBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return f(req), nil
}

func slogResponse(req *http.Request, status int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}
}

func ExampleNewSlogObserver() {
	// A logger that writes text without times, so the output is the same
	// on every run. Real code passes its own logger.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))

	// An upstream that asks every caller to wait a second.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintln(w, "slow down")
	}))
	defer upstream.Close()

	tb, _ := throttle.NewTokenBucket(throttle.PerSecond(10), 1)
	q, _ := queue.New(1, 0) // one request at a time, nobody waits in line
	client := &http.Client{Transport: egress.NewTransport(nil,
		egress.WithLimiter(tb),
		egress.WithQueue(q),
		egress.WithKey(egress.KeyByHeader("X-Api-Key")),
		egress.WithObserver(egress.NewSlogObserver(logger)),
	)}

	req, _ := http.NewRequest(http.MethodGet, upstream.URL, nil)
	req.Header.Set("X-Api-Key", "secret")
	resp, err := client.Do(req) // the 429 pauses the key; the body holds the queue slot
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.Do(req) // refused at once: the queue is full
	fmt.Println("second request:", errors.Is(err, queue.ErrFull))
	resp.Body.Close()
	// Output:
	// level=WARN msg="egress: key paused" key_hash=da12c2db9b156711 status=429 duration=1s
	// level=WARN msg="egress: request refused: queue full" key_hash=da12c2db9b156711 attempt=1
	// second request: true
}
