package egress_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// llmBudget is three token buckets, for requests, input and output
// tokens, that refill too slowly to matter within a test, and their All.
type llmBudget struct {
	parts []*throttle.TokenBucket
	all   throttle.Limiter
}

func newLLMBudget(t *testing.T) llmBudget {
	t.Helper()
	var b llmBudget
	var ls []throttle.Limiter
	for _, n := range []int{10, 1000, 2000} {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: n, Per: time.Hour}, n)
		require.NoError(t, err)
		b.parts = append(b.parts, tb)
		ls = append(ls, tb)
	}
	b.all = throttle.All(ls...)
	return b
}

// remaining returns what each part has left for key.
func (b llmBudget) remaining(t *testing.T, key string) []int {
	t.Helper()
	var left []int
	for _, p := range b.parts {
		st, err := p.Inspect(context.Background(), key)
		require.NoError(t, err)
		left = append(left, st.Remaining)
	}
	return left
}

// estimateOf estimates every request at 1 request, 100 input tokens and
// 1000 output tokens.
func estimateOf(*http.Request) ([]int, error) { return []int{1, 100, 1000}, nil }

func TestSettle(t *testing.T) {
	tests := []struct {
		name       string
		giveAnswer func(req *http.Request, n int) (*http.Response, error)
		giveOpts   []egress.Option
		giveClient func(rt http.RoundTripper) *http.Client
		giveUse    func(t *testing.T, resp *http.Response) // read, settle, close
		wantLeft   []int
		wantSent   int
	}{
		{
			name: "settled after close",
			giveUse: func(t *testing.T, resp *http.Response) {
				require.NoError(t, resp.Body.Close())
				require.NoError(t, egress.Settle(resp, 1, 100, 300))
			},
			wantLeft: []int{9, 900, 1700},
			wantSent: 1,
		},
		{
			name: "settled before close, after the body's end",
			giveUse: func(t *testing.T, resp *http.Response) {
				_, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.NoError(t, egress.Settle(resp, 1, 80, 300))
				require.NoError(t, resp.Body.Close())
			},
			wantLeft: []int{9, 920, 1700},
			wantSent: 1,
		},
		{
			name:     "never settled keeps the estimate",
			giveUse:  func(t *testing.T, resp *http.Response) { require.NoError(t, resp.Body.Close()) },
			wantLeft: []int{9, 900, 1000},
			wantSent: 1,
		},
		{
			name: "the first settle wins",
			giveUse: func(t *testing.T, resp *http.Response) {
				require.NoError(t, egress.Settle(resp, 1, 100, 300))
				require.NoError(t, egress.Settle(resp, 1, 100, 900))
				require.NoError(t, resp.Body.Close())
			},
			wantLeft: []int{9, 900, 1700},
			wantSent: 1,
		},
		{
			name: "more than estimated is charged",
			giveUse: func(t *testing.T, resp *http.Response) {
				require.NoError(t, egress.Settle(resp, 1, 100, 1500))
				require.NoError(t, resp.Body.Close())
			},
			wantLeft: []int{9, 900, 500},
			wantSent: 1,
		},
		{
			name:       "through an http.Client with a Timeout, which wraps the body",
			giveClient: func(rt http.RoundTripper) *http.Client { return &http.Client{Transport: rt, Timeout: time.Minute} },
			giveUse: func(t *testing.T, resp *http.Response) {
				require.NoError(t, resp.Body.Close())
				require.NoError(t, egress.Settle(resp, 1, 100, 300))
			},
			wantLeft: []int{9, 900, 1700},
			wantSent: 1,
		},
		{
			name: "after a retry, the attempt that brought the response",
			giveAnswer: func(req *http.Request, n int) (*http.Response, error) {
				if n == 0 {
					return respond(req, http.StatusTooManyRequests, "Retry-After", "1"), nil
				}
				return respond(req, http.StatusOK), nil
			},
			giveOpts: []egress.Option{egress.WithRetry(retryafter.Policy{})},
			giveUse: func(t *testing.T, resp *http.Response) {
				require.NoError(t, egress.Settle(resp, 1, 100, 300))
				require.NoError(t, resp.Body.Close())
			},
			// The 429's attempt keeps its estimate; the pause shifts
			// nothing that Remaining shows.
			wantLeft: []int{8, 800, 700},
			wantSent: 2,
		},
		{
			name: "from the headers, with WithActual",
			giveAnswer: func(req *http.Request, _ int) (*http.Response, error) {
				return respond(req, http.StatusOK, "X-Output-Tokens", "250"), nil
			},
			giveOpts: []egress.Option{egress.WithActual(func(resp *http.Response) ([]int, bool) {
				n, err := strconv.Atoi(resp.Header.Get("X-Output-Tokens"))
				return []int{1, 100, n}, err == nil
			})},
			giveUse: func(t *testing.T, resp *http.Response) {
				require.NoError(t, egress.Settle(resp, 1, 100, 900)) // does nothing: settled already
				require.NoError(t, resp.Body.Close())
			},
			wantLeft: []int{9, 900, 1750},
			wantSent: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newLLMBudget(t)
				base := &fakeBase{answer: tt.giveAnswer}
				opts := append([]egress.Option{egress.WithLimiter(b.all), egress.WithEstimate(estimateOf)}, tt.giveOpts...)
				rt := egress.NewTransport(base, opts...)
				client := &http.Client{Transport: rt}
				if tt.giveClient != nil {
					client = tt.giveClient(rt)
				}
				req, err := http.NewRequest(http.MethodGet, "http://api.test/v1", nil)
				require.NoError(t, err)
				resp, err := client.Do(req)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				tt.giveUse(t, resp)
				assert.Equal(t, tt.wantLeft, b.remaining(t, "api.test"))
				assert.Equal(t, tt.wantSent, base.count())
			})
		})
	}
}

func TestSettleErrors(t *testing.T) {
	// Each request gets a budget of its own, so that none waits.
	plain := func(t *testing.T) *http.Client {
		return &http.Client{Transport: egress.NewTransport(&fakeBase{}, egress.WithLimiter(newLLMBudget(t).all))}
	}
	estimating := func(t *testing.T) *http.Client {
		return &http.Client{Transport: egress.NewTransport(&fakeBase{}, egress.WithLimiter(newLLMBudget(t).all), egress.WithEstimate(estimateOf))}
	}
	get := func(t *testing.T, c func(*testing.T) *http.Client, ctx context.Context) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1", nil)
		require.NoError(t, err)
		resp, err := c(t).Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp
	}
	tests := []struct {
		name    string
		giveRes func(t *testing.T) *http.Response
		give    []int
		wantIs  error
		wantErr string
	}{
		{name: "nil response", giveRes: func(*testing.T) *http.Response { return nil }, give: []int{1}, wantIs: egress.ErrNothingToSettle},
		{name: "without WithEstimate", giveRes: func(t *testing.T) *http.Response { return get(t, plain, context.Background()) }, give: []int{1}, wantIs: egress.ErrNothingToSettle},
		{
			name: "with WithRequestCost",
			giveRes: func(t *testing.T) *http.Response {
				return get(t, estimating, egress.WithRequestCost(context.Background(), 1))
			},
			give: []int{1}, wantIs: egress.ErrNothingToSettle,
		},
		{
			name:    "too few values",
			giveRes: func(t *testing.T) *http.Response { return get(t, estimating, context.Background()) },
			give:    []int{1, 2}, wantErr: "throttle: Settle needs 3 actual costs, one per part, got 2",
		},
		{
			name:    "a negative value",
			giveRes: func(t *testing.T) *http.Response { return get(t, estimating, context.Background()) },
			give:    []int{1, -2, 3}, wantErr: "throttle: Settle's actual cost of part 1 must not be negative, got -2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := egress.Settle(tt.giveRes(t), tt.give...)
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
				return
			}
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestEstimate(t *testing.T) {
	tb := func(t *testing.T) *throttle.TokenBucket {
		l, err := throttle.NewTokenBucket(throttle.Rate{N: 100, Per: time.Hour}, 100)
		require.NoError(t, err)
		return l
	}
	tests := []struct {
		name        string
		giveLimiter func(t *testing.T) throttle.Limiter
		giveCosts   []int
		giveErr     error
		wantErr     string // empty: sent
		wantLeft    int    // what the limiter has left, when wantErr is empty
	}{
		{
			name:        "one cost on a limiter that is not a PartsReserver",
			giveLimiter: func(t *testing.T) throttle.Limiter { return tb(t) },
			giveCosts:   []int{30}, wantLeft: 70,
		},
		{
			name:        "several costs on a limiter that is not a PartsReserver",
			giveLimiter: func(t *testing.T) throttle.Limiter { return tb(t) },
			giveCosts:   []int{1, 30},
			wantErr:     `Post "http://api.test/v1": egress: request for key "api.test" not sent: egress: WithEstimate gave 2 costs for a request to key "api.test", but the limiter, a *throttle.TokenBucket, is not a throttle.PartsReserver and books one`,
		},
		{
			name:        "the wrong number of costs",
			giveLimiter: func(t *testing.T) throttle.Limiter { return throttle.All(tb(t), tb(t)) },
			giveCosts:   []int{1, 2, 3},
			wantErr:     `Post "http://api.test/v1": egress: request for key "api.test" not sent: throttle: ReserveParts needs 2 costs, one per part, got 3`,
		},
		{
			name:        "a negative cost",
			giveLimiter: func(t *testing.T) throttle.Limiter { return throttle.All(tb(t), tb(t)) },
			giveCosts:   []int{1, -3},
			wantErr:     `Post "http://api.test/v1": egress: estimated cost of part 1 of a request to key "api.test" must not be negative, got -3`,
		},
		{
			name:        "an error from the estimate",
			giveLimiter: func(t *testing.T) throttle.Limiter { return throttle.All(tb(t), tb(t)) },
			giveErr:     errors.New("no max_tokens"),
			wantErr:     `Post "http://api.test/v1": egress: estimating the cost of a request to key "api.test": no max_tokens`,
		},
		{
			name:        "costs all 0 book nothing",
			giveLimiter: func(t *testing.T) throttle.Limiter { return throttle.All(tb(t), tb(t)) },
			giveCosts:   []int{0, 0}, wantLeft: 100,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.giveLimiter(t)
			base := &fakeBase{}
			client := &http.Client{Transport: egress.NewTransport(base, egress.WithLimiter(l),
				egress.WithEstimate(func(*http.Request) ([]int, error) { return tt.giveCosts, tt.giveErr }))}
			body := newTrackedBody("{}")
			req, err := http.NewRequest(http.MethodPost, "http://api.test/v1", body)
			require.NoError(t, err)
			resp, err := client.Do(req)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				assert.Zero(t, base.count())
				assert.Positive(t, body.closes.Load(), "request body closed")
				return
			}
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			st, err := l.(throttle.Inspector).Inspect(context.Background(), "api.test")
			require.NoError(t, err)
			assert.Equal(t, tt.wantLeft, st.Remaining)
		})
	}
}

func TestEstimatePanics(t *testing.T) {
	assert.PanicsWithValue(t, "egress: WithEstimate given a nil func", func() { egress.WithEstimate(nil) })
	assert.PanicsWithValue(t, "egress: WithActual given a nil func", func() { egress.WithActual(nil) })
	assert.PanicsWithValue(t, "egress: WithEstimate needs WithLimiter: the estimate is booked on its parts", func() {
		egress.NewTransport(nil, egress.WithEstimate(estimateOf))
	})
}
