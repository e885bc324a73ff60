package egress_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// answer is one scripted response: a status and header pairs.
type answer struct {
	status int
	header []string
}

func TestRetryAndPause(t *testing.T) {
	tooMany := answer{status: 429, header: []string{"Retry-After", "1"}}
	ok := answer{status: 200}
	twoSeconds := func(int) time.Duration { return 2 * time.Second }
	tests := []struct {
		name         string
		givePolicy   *retryafter.Policy // nil: no WithRetry
		giveMethod   string
		giveBody     string // "", "replayable" or "unreplayable"
		giveAnswers  []answer
		wantAttempts int
		wantStatus   int
		wantPauses   []time.Duration
		wantElapsed  time.Duration
	}{
		{
			name:         "429 then 200",
			givePolicy:   &retryafter.Policy{},
			giveAnswers:  []answer{tooMany, ok},
			wantAttempts: 2,
			wantStatus:   200,
			wantPauses:   []time.Duration{time.Second},
			wantElapsed:  time.Second,
		},
		{
			name:         "exhausted: the last 429 comes back",
			givePolicy:   &retryafter.Policy{},
			giveAnswers:  []answer{tooMany, tooMany, tooMany, tooMany, ok},
			wantAttempts: retryafter.DefaultMaxAttempts,
			wantStatus:   429,
			wantPauses:   []time.Duration{time.Second, time.Second, time.Second, time.Second},
			wantElapsed:  3 * time.Second,
		},
		{
			name:         "MaxAttempts",
			givePolicy:   &retryafter.Policy{MaxAttempts: 2},
			giveAnswers:  []answer{tooMany, tooMany, ok},
			wantAttempts: 2,
			wantStatus:   429,
			wantPauses:   []time.Duration{time.Second, time.Second},
			wantElapsed:  time.Second,
		},
		{
			name:         "Retry-After beyond MaxDelay comes back at once, the key paused",
			givePolicy:   &retryafter.Policy{MaxDelay: 10 * time.Second},
			giveAnswers:  []answer{{status: 429, header: []string{"Retry-After", "45"}}, ok},
			wantAttempts: 1,
			wantStatus:   429,
			wantPauses:   []time.Duration{45 * time.Second},
		},
		{
			name:         "MaxPause caps the pause, not the retry",
			givePolicy:   &retryafter.Policy{MaxPause: 5 * time.Second, MaxDelay: time.Minute},
			giveAnswers:  []answer{{status: 429, header: []string{"Retry-After", "20"}}, ok},
			wantAttempts: 2,
			wantStatus:   200,
			wantPauses:   []time.Duration{5 * time.Second},
			wantElapsed:  20 * time.Second,
		},
		{
			name:         "default MaxPause",
			givePolicy:   &retryafter.Policy{},
			giveAnswers:  []answer{{status: 429, header: []string{"Retry-After", "3600"}}, ok},
			wantAttempts: 1,
			wantStatus:   429,
			wantPauses:   []time.Duration{retryafter.DefaultMaxPause},
		},
		{
			name:         "unreplayable body is not retried",
			givePolicy:   &retryafter.Policy{},
			giveMethod:   http.MethodPost,
			giveBody:     "unreplayable",
			giveAnswers:  []answer{tooMany, ok},
			wantAttempts: 1,
			wantStatus:   429,
			wantPauses:   []time.Duration{time.Second},
		},
		{
			name:         "replayable POST is retried on a 429",
			givePolicy:   &retryafter.Policy{},
			giveMethod:   http.MethodPost,
			giveBody:     "replayable",
			giveAnswers:  []answer{tooMany, ok},
			wantAttempts: 2,
			wantStatus:   200,
			wantPauses:   []time.Duration{time.Second},
			wantElapsed:  time.Second,
		},
		{
			name:         "POST is not retried on a 503",
			givePolicy:   &retryafter.Policy{},
			giveMethod:   http.MethodPost,
			giveBody:     "replayable",
			giveAnswers:  []answer{{status: 503, header: []string{"Retry-After", "2"}}, ok},
			wantAttempts: 1,
			wantStatus:   503,
			wantPauses:   []time.Duration{2 * time.Second},
		},
		{
			name:         "plain 403 is neither retried nor paused",
			givePolicy:   &retryafter.Policy{Statuses: []int{403, 429}},
			giveAnswers:  []answer{{status: 403}, ok},
			wantAttempts: 1,
			wantStatus:   403,
		},
		{
			name:         "403 with quota at 0 pauses",
			givePolicy:   &retryafter.Policy{},
			giveAnswers:  []answer{{status: 403, header: []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"}}, ok},
			wantAttempts: 1,
			wantStatus:   403,
			wantPauses:   []time.Duration{30 * time.Second},
		},
		{
			name:         "503 without a delay backs off locally, pausing no one",
			givePolicy:   &retryafter.Policy{Backoff: twoSeconds},
			giveAnswers:  []answer{{status: 503}, {status: 503}, ok},
			wantAttempts: 3,
			wantStatus:   200,
			wantElapsed:  4 * time.Second,
		},
		{
			name:         "500 is not retried",
			givePolicy:   &retryafter.Policy{},
			giveAnswers:  []answer{{status: 500}, ok},
			wantAttempts: 1,
			wantStatus:   500,
		},
		{
			name:         "200 with a quota at 0 is a budget, not a pause",
			givePolicy:   &retryafter.Policy{},
			giveAnswers:  []answer{{status: 200, header: []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "10"}}},
			wantAttempts: 1,
			wantStatus:   200,
		},
		{
			name:         "200 with quota left does nothing",
			givePolicy:   &retryafter.Policy{},
			giveAnswers:  []answer{{status: 200, header: []string{"X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "10"}}},
			wantAttempts: 1,
			wantStatus:   200,
		},
		{
			name:         "without WithRetry a 429 pauses and comes back",
			giveAnswers:  []answer{tooMany, ok},
			wantAttempts: 1,
			wantStatus:   429,
			wantPauses:   []time.Duration{time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					mu     sync.Mutex
					bodies []*trackedBody
					pauses []time.Duration
				)
				base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
					a := tt.giveAnswers[n]
					resp := respond(req, a.status, a.header...)
					mu.Lock()
					bodies = append(bodies, resp.Body.(*trackedBody))
					mu.Unlock()
					return resp, nil
				}}
				opts := []egress.Option{
					egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1000), 10)),
					egress.WithQueue(newQueue(t, 1, 0)),
					egress.WithObserver(&egress.Observer{Paused: func(i egress.PauseInfo) { pauses = append(pauses, i.Duration) }}),
				}
				if tt.givePolicy != nil {
					p := *tt.givePolicy
					p.Jitter = zeroJitter
					opts = append(opts, egress.WithRetry(p))
				}
				tr := egress.NewTransport(base, opts...)
				req := newRequest(t, context.Background(), tt.giveMethod, "http://api.test/", nil)
				var reqBody *trackedBody
				switch tt.giveBody {
				case "replayable":
					req = replayable(t, context.Background(), tt.giveMethod)
				case "unreplayable":
					req, reqBody = unreplayable(t, context.Background(), tt.giveMethod)
				}
				start := time.Now()

				resp, err := tr.RoundTrip(req)

				require.NoError(t, err)
				assert.Equal(t, tt.wantElapsed, time.Since(start))
				assert.Equal(t, tt.wantStatus, resp.StatusCode)
				assert.Equal(t, tt.wantAttempts, base.count())
				assert.Equal(t, tt.wantPauses, pauses)
				for _, b := range bodies[:len(bodies)-1] {
					assert.Equal(t, int32(1), b.closes.Load(), "a discarded response is closed")
				}
				assert.Equal(t, int32(0), bodies[len(bodies)-1].closes.Load(), "the returned one is the caller's")
				assert.Equal(t, 1, tr.Stats().InFlight)
				drainClose(t, resp)
				assert.Equal(t, 0, tr.Stats().InFlight)
				if reqBody != nil {
					assert.Equal(t, int32(1), reqBody.closes.Load())
				}
			})
		})
	}
}

func TestRetryDrainIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := &trackedBody{r: strings.NewReader(strings.Repeat("x", 1<<20))}
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			if n == 0 {
				resp := respond(req, http.StatusTooManyRequests, "Retry-After", "1")
				resp.Body = big
				return resp, nil
			}
			return respond(req, http.StatusOK), nil
		}}
		tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))

		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
		require.NoError(t, err)
		drainClose(t, resp)

		assert.Equal(t, int64(64<<10+1), big.read.Load(), "64 KiB, and a byte that tells it longer")
		assert.Equal(t, int32(1), big.closes.Load())
	})
}

func TestRetryReturnsTheResponseWhenTheDeadlineIsTooClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			return respond(req, http.StatusTooManyRequests, "Retry-After", "5"), nil
		}}
		tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()

		resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
		require.NoError(t, err)
		drainClose(t, resp)

		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, 1, base.count())
	})
}

func TestRetryGetBodyFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			return respond(req, http.StatusTooManyRequests, "Retry-After", "1"), nil
		}}
		tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))
		req := replayable(t, context.Background(), http.MethodPut)
		req.GetBody = func() (io.ReadCloser, error) { return nil, errBase }

		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drainClose(t, resp)

		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the last response is the answer")
		assert.Equal(t, 1, base.count())
	})
}

// TestRetryWithoutLimiter retries after the server's delay with
// WithRetry alone, and the delay pauses the key (the Transport's own
// record of the upstream).
func TestRetryWithoutLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			if n == 0 {
				return respond(req, http.StatusServiceUnavailable, "Retry-After", "7"), nil
			}
			return respond(req, http.StatusOK), nil
		}}
		tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{Jitter: zeroJitter}))
		start := time.Now()

		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
		require.NoError(t, err)
		drainClose(t, resp)

		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 7*time.Second, time.Since(start))
		assert.Equal(t, egress.Stats{Sent: 2, Retries: 1, Pauses: 1}, tr.Stats())
	})
}

// TestRefusedRetryReturnsTheResponse answers 429 (or 503) and then makes
// the retry impossible in each way it can be: the caller gets the response
// that arrived, never a local error, and every slot and body is given back.
func TestRefusedRetryReturnsTheResponse(t *testing.T) {
	failSecond := func(l throttle.Limiter) throttle.Limiter {
		var calls int
		return limiterFunc(func(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
			if calls++; calls > 1 {
				return nil, throttle.ErrTooManyKeys
			}
			return l.Reserve(ctx, key, n, maxWait)
		})
	}
	tests := []struct {
		name        string
		giveLimiter func(l throttle.Limiter) throttle.Limiter
		giveMaxWait time.Duration
		giveTimeout time.Duration // 0: no deadline
		giveRetry   func(req *http.Request) (*http.Response, error)
		wantSent    int
		wantRefused uint64
	}{
		{
			name:        "slot beyond the max wait",
			giveLimiter: func(l throttle.Limiter) throttle.Limiter { return l },
			giveMaxWait: 500 * time.Millisecond,
			wantSent:    1,
			wantRefused: 1,
		},
		{
			name:        "slot beyond the deadline",
			giveLimiter: func(l throttle.Limiter) throttle.Limiter { return l },
			giveMaxWait: time.Minute,
			giveTimeout: 1500 * time.Millisecond,
			wantSent:    1,
			wantRefused: 1,
		},
		{
			name:        "limiter error",
			giveLimiter: failSecond,
			giveMaxWait: time.Minute,
			wantSent:    1,
			wantRefused: 1,
		},
		{
			name:        "the retry's attempt fails",
			giveLimiter: func(l throttle.Limiter) throttle.Limiter { return l },
			giveMaxWait: time.Minute,
			giveRetry:   func(*http.Request) (*http.Response, error) { return nil, errBase },
			wantSent:    2,
		},
		{
			name:        "the retry's attempt breaks the contract",
			giveLimiter: func(l throttle.Limiter) throttle.Limiter { return l },
			giveMaxWait: time.Minute,
			giveRetry:   func(*http.Request) (*http.Response, error) { return nil, nil },
			wantSent:    2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var bodies []*trackedBody
				base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
					if n > 0 {
						return tt.giveRetry(req)
					}
					resp := respond(req, http.StatusTooManyRequests, "Retry-After", "1")
					bodies = append(bodies, resp.Body.(*trackedBody))
					return resp, nil
				}}
				q := newQueue(t, 1, 0)
				tr := egress.NewTransport(base,
					egress.WithLimiter(tt.giveLimiter(newTokenBucket(t, throttle.PerSecond(1), 1))),
					egress.WithMaxWait(tt.giveMaxWait),
					egress.WithQueue(q),
					egress.WithRetry(retryafter.Policy{Jitter: zeroJitter}),
				)
				ctx := context.Background()
				if tt.giveTimeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.giveTimeout)
					defer cancel()
				}
				req, reqBody := unreplayable(t, ctx, http.MethodPut)
				req.GetBody = func() (io.ReadCloser, error) { return newTrackedBody("payload"), nil }

				resp, err := tr.RoundTrip(req)

				require.NoError(t, err, "a response arrived")
				assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
				assert.Equal(t, "1", resp.Header.Get("Retry-After"))
				got, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, "ok", string(got), "the body is the upstream's")
				require.NoError(t, resp.Body.Close())
				assert.Equal(t, int32(1), bodies[0].closes.Load())
				assert.Equal(t, int32(1), reqBody.closes.Load())
				assert.Equal(t, 0, q.Stats().InFlight)
				assert.Equal(t, tt.wantSent, base.count())
				assert.Equal(t, tt.wantRefused, tr.Stats().Refused)
			})
		})
	}
}
