package egress_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
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

func TestNoOptionsBehavesLikeBase(t *testing.T) {
	want := &http.Response{StatusCode: http.StatusTeapot, Body: newTrackedBody("tea")}
	tests := []struct {
		name     string
		giveResp *http.Response
		giveErr  error
	}{
		{name: "response", giveResp: want},
		{name: "error", giveErr: errBase},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *http.Request
			base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				got = req
				return tt.giveResp, tt.giveErr
			})
			req := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)

			resp, err := egress.NewTransport(base).RoundTrip(req)

			assert.Same(t, req, got, "the request reaches the base unchanged")
			assert.Same(t, tt.giveResp, resp, "the response comes back unwrapped")
			assert.Equal(t, tt.giveErr, err)
		})
	}
}

func TestNewClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	defer srv.Close()
	client := egress.NewClient(egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(100), 10)))
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	assert.Equal(t, "hello", string(body))
	assert.IsType(t, &egress.Transport{}, client.Transport)
}

func TestNewTransportNilBase(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	tr := egress.NewTransport(nil, egress.WithQueue(newQueue(t, 1, 0)))
	defer tr.CloseIdleConnections()

	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	drainClose(t, resp)

	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, 0, tr.Stats().InFlight)
}

func TestZeroTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	resp, err := (&http.Client{Transport: &egress.Transport{}}).Get(srv.URL)
	require.NoError(t, err)
	drainClose(t, resp)

	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestNilOptionsPanic(t *testing.T) {
	tests := []struct {
		name      string
		giveBuild func()
		wantPanic string
	}{
		{
			name:      "nil Option",
			giveBuild: func() { egress.NewTransport(nil, nil) },
			wantPanic: "egress: NewTransport given a nil Option at index 0",
		},
		{
			name:      "nil Option in NewClient",
			giveBuild: func() { egress.NewClient(egress.WithMaxWait(time.Second), nil) },
			wantPanic: "egress: NewTransport given a nil Option at index 1",
		},
		{
			name:      "WithLimiter",
			giveBuild: func() { egress.WithLimiter(nil) },
			wantPanic: "egress: WithLimiter given a nil throttle.Limiter",
		},
		{
			name:      "WithQueue",
			giveBuild: func() { egress.WithQueue(nil) },
			wantPanic: "egress: WithQueue given a nil queue",
		},
		{
			name:      "WithQueue nil *queue.Queue",
			giveBuild: func() { egress.WithQueue((*queue.Queue)(nil)) },
			wantPanic: "egress: WithQueue given a nil queue",
		},
		{
			name:      "WithKey",
			giveBuild: func() { egress.WithKey(nil) },
			wantPanic: "egress: WithKey given a nil func",
		},
		{
			name:      "WithCost",
			giveBuild: func() { egress.WithCost(nil) },
			wantPanic: "egress: WithCost given a nil func",
		},
		{
			name:      "WithObserver",
			giveBuild: func() { egress.WithObserver(nil) },
			wantPanic: "egress: WithObserver given a nil *Observer",
		},
		{
			name:      "WithRetry invalid",
			giveBuild: func() { egress.WithRetry(retryafter.Policy{MaxAttempts: -1}) },
			wantPanic: "egress: WithRetry given an invalid Policy: retryafter: Policy.MaxAttempts is -1, want 0 (the default) or more",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.wantPanic, tt.giveBuild)
		})
	}
}

func TestQueueFull(t *testing.T) {
	q := newQueue(t, 1, 0)
	var refusals []egress.RefusalInfo
	tr := egress.NewTransport(&fakeBase{}, egress.WithQueue(q), egress.WithObserver(&egress.Observer{
		Refused: func(i egress.RefusalInfo) { refusals = append(refusals, i) },
	}))
	client := &http.Client{Transport: tr}
	held, err := client.Get("http://api.test/")
	require.NoError(t, err)
	req, body := unreplayable(t, context.Background(), http.MethodPost)

	resp, err := client.Do(req)

	assert.Nil(t, resp)
	assert.ErrorIs(t, err, queue.ErrFull)
	var uerr *url.Error
	assert.ErrorAs(t, err, &uerr, "http.Client wraps it")
	assert.Equal(t, int32(1), body.closes.Load(), "the request body is closed")
	assert.Equal(t, 0, int(body.read.Load()), "and never sent")
	require.Len(t, refusals, 1)
	assert.Equal(t, "api.test", refusals[0].Key)
	assert.ErrorIs(t, refusals[0].Err, queue.ErrFull)
	assert.Contains(t, err.Error(), `egress: request for key "api.test" not sent: queue: full`)
	drainClose(t, held)
	assert.Equal(t, egress.Stats{Sent: 1, Refused: 1}, tr.Stats())
}

func TestLimitRefusal(t *testing.T) {
	tests := []struct {
		name         string
		giveMaxWait  time.Duration
		giveTimeout  time.Duration
		wantRetry    time.Duration
		wantDeadline bool
	}{
		{name: "only now", giveMaxWait: 0, wantRetry: time.Second},
		{name: "max wait", giveMaxWait: 400 * time.Millisecond, wantRetry: 600 * time.Millisecond},
		{name: "deadline", giveMaxWait: -1, giveTimeout: 300 * time.Millisecond, wantRetry: 700 * time.Millisecond, wantDeadline: true},
		{name: "deadline before max wait", giveMaxWait: time.Hour, giveTimeout: 300 * time.Millisecond, wantRetry: 700 * time.Millisecond, wantDeadline: true},
		{name: "max wait before deadline", giveMaxWait: 100 * time.Millisecond, giveTimeout: 300 * time.Millisecond, wantRetry: 900 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{}
				client := &http.Client{Transport: egress.NewTransport(base,
					egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1), 1)),
					egress.WithMaxWait(tt.giveMaxWait),
				)}
				first, err := client.Get("http://api.test/")
				require.NoError(t, err)
				drainClose(t, first)
				ctx := context.Background()
				if tt.giveTimeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.giveTimeout)
					defer cancel()
				}

				for range 2 { // a refusal takes nothing, so the second is the same
					req, body := unreplayable(t, ctx, http.MethodPut)
					resp, err := client.Do(req)

					assert.Nil(t, resp)
					var le *throttle.LimitError
					require.ErrorAs(t, err, &le)
					assert.ErrorIs(t, err, throttle.ErrLimitExceeded)
					assert.Equal(t, "api.test", le.Key)
					assert.Equal(t, tt.wantRetry, le.RetryAfter)
					assert.Equal(t, tt.wantDeadline, le.Timeout())
					var uerr *url.Error
					require.ErrorAs(t, err, &uerr)
					assert.Equal(t, tt.wantDeadline, uerr.Timeout())
					assert.Equal(t, int32(1), body.closes.Load())
				}
				assert.Equal(t, 1, base.count())
			})
		})
	}
}

func TestRequestBodyClosedOnEarlyReturn(t *testing.T) {
	failing := limiterFunc(func(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
		return nil, throttle.ErrTooManyKeys
	})
	tests := []struct {
		name    string
		giveOpt egress.Option
		giveCtx func() context.Context
		wantErr error
	}{
		{
			name:    "limiter error",
			giveOpt: egress.WithLimiter(failing),
			giveCtx: context.Background,
			wantErr: throttle.ErrTooManyKeys,
		},
		{
			name:    "cancelled before the queue",
			giveOpt: egress.WithQueue(newQueue(t, 1, 1)),
			giveCtx: cancelled,
			wantErr: context.Canceled,
		},
		{
			name:    "cancelled before the limiter",
			giveOpt: egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1), 1)),
			giveCtx: cancelled,
			wantErr: context.Canceled,
		},
		{
			name: "limiter breaks its contract",
			giveOpt: egress.WithLimiter(limiterFunc(func(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
				return nil, nil
			})),
			giveCtx: context.Background,
		},
		{
			name:    "negative cost",
			giveOpt: egress.WithCost(func(*http.Request) int { return -1 }),
			giveCtx: context.Background,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &fakeBase{}
			tr := egress.NewTransport(base, tt.giveOpt, egress.WithRetry(retryafter.Policy{}))
			req, body := unreplayable(t, tt.giveCtx(), http.MethodPost)

			resp, err := tr.RoundTrip(req)

			assert.Nil(t, resp)
			require.Error(t, err)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			}
			assert.Equal(t, int32(1), body.closes.Load())
			assert.Equal(t, 0, base.count())
		})
	}
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// limiterFunc adapts a func to throttle.Limiter.
type limiterFunc func(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error)

func (f limiterFunc) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	return f(ctx, key, n, maxWait)
}

func TestLimiterErrorIsWrapped(t *testing.T) {
	failing := limiterFunc(func(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
		return nil, throttle.ErrTooManyKeys
	})
	tr := egress.NewTransport(&fakeBase{}, egress.WithLimiter(failing))

	_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))

	assert.ErrorIs(t, err, throttle.ErrTooManyKeys)
	assert.EqualError(t, err, `egress: request for key "api.test" not sent: throttle: too many keys`)
	assert.Equal(t, uint64(1), tr.Stats().Refused)
}

func TestNeverBothResponseAndError(t *testing.T) {
	body := newTrackedBody("half")
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: body}, errBase
	})
	q := newQueue(t, 1, 0)
	tr := egress.NewTransport(base, egress.WithQueue(q))

	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))

	assert.Nil(t, resp)
	assert.ErrorIs(t, err, errBase)
	assert.Equal(t, int32(1), body.closes.Load(), "the stray response is closed")
	assert.Equal(t, 0, q.Stats().InFlight)
}

func TestNilResponseFromBase(t *testing.T) {
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	tr := egress.NewTransport(base, egress.WithQueue(newQueue(t, 1, 0)))

	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))

	assert.Nil(t, resp)
	assert.EqualError(t, err, "egress: base RoundTripper returned a nil response and a nil error")
	assert.Equal(t, 0, tr.Stats().InFlight)
}

func TestAnyStatusIsAResponse(t *testing.T) {
	for _, status := range []int{200, 204, 301, 400, 403, 404, 429, 500, 503, 529} {
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return respond(req, status), nil
		})
		tr := egress.NewTransport(base, egress.WithQueue(newQueue(t, 1, 0)),
			egress.WithRetry(retryafter.Policy{MaxAttempts: 1}))

		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))

		require.NoError(t, err, "status %d", status)
		assert.Equal(t, status, resp.StatusCode)
		drainClose(t, resp)
	}
}

func TestRequestNotModified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			req.Header.Get("X") // a base may read, never write
			if n < 2 {
				return respond(req, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return respond(req, http.StatusOK), nil
		}}
		tr := egress.NewTransport(base,
			egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(10), 1)),
			egress.WithQueue(newQueue(t, 1, 0)),
			egress.WithRetry(retryafter.Policy{Jitter: zeroJitter}),
		)
		req := replayable(t, context.Background(), http.MethodPost)
		req.Header.Set("Authorization", "Bearer secret")
		body := req.Body
		snapshot := *req
		header := req.Header.Clone()

		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drainClose(t, resp)

		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 3, base.count())
		assert.True(t, body == req.Body, "req.Body is the caller's")
		assert.Equal(t, header, req.Header)
		assert.Equal(t, snapshot.Method, req.Method)
		assert.Equal(t, snapshot.URL, req.URL)
		assert.Equal(t, snapshot.ContentLength, req.ContentLength)
		assert.Same(t, req, base.reqs[0], "the first attempt sends req itself")
		assert.NotSame(t, req, base.reqs[1], "a retry with a fresh body sends a copy")
	})
}

func TestCloseIdleConnections(t *testing.T) {
	base := &fakeBase{}
	tr := egress.NewTransport(base, egress.WithQueue(newQueue(t, 1, 0)))

	tr.CloseIdleConnections()
	egress.NewTransport(roundTripFunc(nil)).CloseIdleConnections() // a base without the method

	assert.Equal(t, 1, base.idles)
}

func TestKeyByHeader(t *testing.T) {
	key := egress.KeyByHeader("x-api-key")
	tests := []struct {
		name       string
		giveHeader string
		wantKey    string
	}{
		{name: "hashed", giveHeader: "sk-live-123", wantKey: "X-Api-Key#" + sha256Hex("sk-live-123")[:16]},
		{name: "another key", giveHeader: "sk-live-456", wantKey: "X-Api-Key#" + sha256Hex("sk-live-456")[:16]},
		{name: "missing", wantKey: "api.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)
			if tt.giveHeader != "" {
				req.Header.Set("X-Api-Key", tt.giveHeader)
			}

			assert.Equal(t, tt.wantKey, key(req))
		})
	}
}

// TestKeyByHeaderEmptyName: an empty header name is a programmer error,
// caught at construction as the other options' are. Before, every request
// was keyed by its host, silently, and all API keys shared one budget.
func TestKeyByHeaderEmptyName(t *testing.T) {
	assert.PanicsWithValue(t, "egress: KeyByHeader given an empty header name", func() { egress.KeyByHeader("") })
}

func TestKeyByHeaderKeepsSecretsOutOfErrors(t *testing.T) {
	const secret = "sk-live-very-secret"
	var seen []string
	tr := egress.NewTransport(&fakeBase{},
		egress.WithLimiter(newTokenBucket(t, throttle.PerMinute(1), 1)),
		egress.WithMaxWait(0),
		egress.WithKey(egress.KeyByHeader("Authorization")),
		egress.WithObserver(&egress.Observer{Refused: func(i egress.RefusalInfo) { seen = append(seen, i.Key, i.Err.Error()) }}),
	)
	send := func() error {
		req := newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			drainClose(t, resp)
		}
		return err
	}
	require.NoError(t, send())

	err := send()

	var le *throttle.LimitError
	require.ErrorAs(t, err, &le)
	assert.True(t, strings.HasPrefix(le.Key, "Authorization#"))
	assert.NotContains(t, err.Error(), secret)
	require.NotEmpty(t, seen)
	for _, s := range seen {
		assert.NotContains(t, s, secret)
	}
}

func TestKeyAndCost(t *testing.T) {
	tests := []struct {
		name     string
		giveOpts []egress.Option
		giveCtx  func(context.Context) context.Context
		wantKey  string
		wantCost int
	}{
		{name: "defaults", wantKey: "api.test:8080", wantCost: 1},
		{
			name:     "funcs",
			giveOpts: []egress.Option{egress.WithKey(func(*http.Request) string { return "tenant-1" }), egress.WithCost(func(r *http.Request) int { return len(r.URL.Path) })},
			wantKey:  "tenant-1",
			wantCost: 4,
		},
		{
			name: "context over defaults",
			giveCtx: func(ctx context.Context) context.Context {
				return egress.WithRequestCost(egress.WithRequestKey(ctx, "batch"), 7)
			},
			wantKey:  "batch",
			wantCost: 7,
		},
		{
			name:     "context over funcs",
			giveOpts: []egress.Option{egress.WithKey(func(*http.Request) string { return "tenant-1" }), egress.WithCost(func(*http.Request) int { return 3 })},
			giveCtx:  func(ctx context.Context) context.Context { return egress.WithRequestKey(ctx, "batch") },
			wantKey:  "batch",
			wantCost: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &recordingLimiter{}
			tr := egress.NewTransport(&fakeBase{}, append([]egress.Option{egress.WithLimiter(l)}, tt.giveOpts...)...)
			ctx := context.Background()
			if tt.giveCtx != nil {
				ctx = tt.giveCtx(ctx)
			}

			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test:8080/abc", nil))
			require.NoError(t, err)
			drainClose(t, resp)

			assert.Equal(t, []string{tt.wantKey}, l.keys)
			assert.Equal(t, []int{tt.wantCost}, l.costs)
		})
	}
}

func TestZeroCostSkipsTheLimiter(t *testing.T) {
	l := &recordingLimiter{}
	tr := egress.NewTransport(&fakeBase{}, egress.WithLimiter(l))
	ctx := egress.WithRequestCost(context.Background(), 0)

	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
	require.NoError(t, err)
	drainClose(t, resp)

	assert.Empty(t, l.keys)
}

func TestObserverAndStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			waits   []egress.WaitInfo
			retries []egress.RetryInfo
			pauses  []egress.PauseInfo
		)
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			if n == 1 {
				return respond(req, http.StatusTooManyRequests, "Retry-After", "3"), nil
			}
			return respond(req, http.StatusOK), nil
		}}
		q := newQueue(t, 1, 5)
		tr := egress.NewTransport(base,
			egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1), 1)),
			egress.WithQueue(q),
			egress.WithRetry(retryafter.Policy{Jitter: zeroJitter}),
			egress.WithObserver(&egress.Observer{
				Waited:   func(i egress.WaitInfo) { waits = append(waits, i) },
				Retrying: func(i egress.RetryInfo) { retries = append(retries, i) },
				Paused:   func(i egress.PauseInfo) { pauses = append(pauses, i) },
			}),
		)
		first, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
		require.NoError(t, err)
		done := make(chan *http.Response)
		go func() {
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
			assert.NoError(t, err)
			done <- resp
		}()
		time.Sleep(2 * time.Second) // the second request waits in line
		synctest.Wait()
		assert.Equal(t, egress.Stats{InFlight: 1, Waiting: 1, Sent: 1}, tr.Stats())
		drainClose(t, first)

		second := <-done
		drainClose(t, second)

		// In line 2s, then sent at once (its slot, 1s, has passed). A 429
		// with Retry-After 3 pauses the key 3s and retries after 3s, when
		// the key's next unit, shifted by the pause, is 1s away.
		assert.Equal(t, []egress.WaitInfo{
			{Key: "api.test", Attempt: 1, Queue: 2 * time.Second},
			{Key: "api.test", Attempt: 2, Limiter: time.Second},
		}, waits)
		assert.Equal(t, []egress.RetryInfo{{Key: "api.test", Attempt: 1, StatusCode: 429, Delay: 3 * time.Second}}, retries)
		assert.Equal(t, []egress.PauseInfo{{Key: "api.test", StatusCode: 429, Duration: 3 * time.Second}}, pauses)
		assert.Equal(t, egress.Stats{Sent: 3, Retries: 1, Pauses: 1}, tr.Stats())
	})
}

// TestNilURL sends a request without a URL, which net/http's own Transport
// refuses with an error: every configuration returns an error too, closes
// the body, and sends nothing.
func TestNilURL(t *testing.T) {
	tests := []struct {
		name     string
		giveOpts []egress.Option
	}{
		{name: "limiter", giveOpts: []egress.Option{egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1), 1))}},
		{name: "retry", giveOpts: []egress.Option{egress.WithRetry(retryafter.Policy{})}},
		{name: "queue", giveOpts: []egress.Option{egress.WithQueue(newQueue(t, 1, 0))}},
		{name: "key by header", giveOpts: []egress.Option{
			egress.WithKey(egress.KeyByHeader("X-Api-Key")),
			egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1), 1)),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &fakeBase{}
			tr := egress.NewTransport(base, tt.giveOpts...)
			req, body := unreplayable(t, context.Background(), http.MethodPost)
			req.URL = nil

			resp, err := tr.RoundTrip(req)

			assert.Nil(t, resp)
			assert.EqualError(t, err, "egress: nil Request.URL")
			assert.Equal(t, int32(1), body.closes.Load())
			assert.Equal(t, 0, base.count())
			assert.Equal(t, 0, tr.Stats().InFlight)
		})
	}
}

// countingQueue is a queue.Interface other than *queue.Queue, as a queue
// shared through Redis would be: it counts the slots it hands out.
type countingQueue struct {
	*queue.Queue
	acquired atomic.Int32
}

func (q *countingQueue) Acquire(ctx context.Context) (func(), error) {
	q.acquired.Add(1)
	return q.Queue.Acquire(ctx)
}

func (q *countingQueue) TryAcquire() (func(), bool) {
	q.acquired.Add(1)
	return q.Queue.TryAcquire()
}

func TestWithQueueTakesAnyQueue(t *testing.T) {
	q := &countingQueue{Queue: newQueue(t, 1, 0)}
	tr := egress.NewTransport(&fakeBase{}, egress.WithQueue(q))

	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	require.NoError(t, err)

	assert.Equal(t, int32(1), q.acquired.Load())
	assert.Equal(t, 1, tr.Stats().InFlight, "Stats reads the queue through the interface")
	drainClose(t, resp)
	assert.Equal(t, 0, tr.Stats().InFlight)
}
