package egress_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/llmupstream"
	"github.com/egress-go/egress/throttle"
)

// llmEstimate books a request to llmupstream at 1 request, its
// prompt_tokens and its max_tokens, read from the body through GetBody.
func llmEstimate(req *http.Request) ([]int, error) {
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var r llmupstream.Request
	if err := json.NewDecoder(body).Decode(&r); err != nil {
		return nil, err
	}
	return []int{1, r.PromptTokens, r.MaxTokens}, nil
}

// TestSettleLLM settles JSON and streamed replies of an Anthropic-style
// API to their usage, and checks that its rate-limit headers reach the
// upstream's record as three quotas, each in its own unit.
func TestSettleLLM(t *testing.T) {
	limits := llmupstream.Limits{Requests: 50, InputTokens: 30000, OutputTokens: 8000, Period: time.Hour}
	api, err := llmupstream.New(llmupstream.Config{Limits: limits})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	defer srv.Close()

	var parts []*throttle.TokenBucket
	var ls []throttle.Limiter
	for _, n := range []int{limits.Requests, limits.InputTokens, limits.OutputTokens} {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: n, Per: limits.Period}, n)
		require.NoError(t, err)
		parts, ls = append(parts, tb), append(ls, tb)
	}
	u, err := throttle.NewUpstream()
	require.NoError(t, err)
	client := egress.NewClient(egress.WithLimiter(throttle.All(ls...)), egress.WithUpstream(u), egress.WithEstimate(llmEstimate))
	defer client.CloseIdleConnections()

	post := func(stream bool) *http.Response {
		body, err := json.Marshal(llmupstream.Request{PromptTokens: 1200, MaxTokens: 1000, Seed: 7, Stream: stream})
		require.NoError(t, err)
		resp, err := client.Post(srv.URL+llmupstream.Path, "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp
	}

	// JSON: read, close, then settle.
	resp := post(false)
	u1, err := llmupstream.ReadUsage(resp.Body, false)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, egress.Settle(resp, 1, u1.InputTokens, u1.OutputTokens))

	// A stream: settle on the event that states the usage, before the
	// body ends, then close it unread.
	resp = post(true)
	var u2 llmupstream.Usage
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		var ev struct {
			Type  string            `json:"type"`
			Usage llmupstream.Usage `json:"usage"`
		}
		if ok && json.Unmarshal(data, &ev) == nil && ev.Type == "message_delta" {
			u2 = ev.Usage
			break
		}
	}
	require.Positive(t, u2.OutputTokens)
	require.NoError(t, egress.Settle(resp, 1, u2.InputTokens, u2.OutputTokens))
	require.NoError(t, resp.Body.Close())

	st := api.Stats()
	want := []int{limits.Requests - 2, limits.InputTokens - st.InputTokens, limits.OutputTokens - st.OutputTokens}
	for i, p := range parts {
		got, err := p.Inspect(context.Background(), srvKey(t, srv.URL))
		require.NoError(t, err)
		// An hour's rate refills a few units while the test runs.
		assert.InDelta(t, want[i], got.Remaining, 3, "part %d", i)
	}

	units := map[string]throttle.Statement{}
	for _, s := range u.Stated(srvKey(t, srv.URL)) {
		units[s.Name] = s
	}
	for _, w := range []struct {
		name, unit string
		limit      int
	}{
		{"requests", throttle.UnitRequests, limits.Requests},
		{"input-tokens", "input-tokens", limits.InputTokens},
		{"output-tokens", "output-tokens", limits.OutputTokens},
	} {
		s, ok := units[w.name]
		if assert.True(t, ok, "statement %q", w.name) {
			assert.Equal(t, w.unit, s.Unit, w.name)
			assert.Equal(t, w.limit, s.Limit, w.name)
		}
	}
}

// srvKey returns the budget key of requests to a server: its host.
func srvKey(_ *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return u.Host
}

// TestOpenAIQuotasMapToUnits checks that OpenAI's headers reach the
// upstream's record as a quota in requests and one in tokens.
func TestOpenAIQuotasMapToUnits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, _ int) (*http.Response, error) {
			return respond(req, http.StatusOK,
				"X-Ratelimit-Limit-Requests", "500", "X-Ratelimit-Remaining-Requests", "499", "X-Ratelimit-Reset-Requests", "120ms",
				"X-Ratelimit-Limit-Tokens", "30000", "X-Ratelimit-Remaining-Tokens", "28000", "X-Ratelimit-Reset-Tokens", "4s"), nil
		}}
		u, err := throttle.NewUpstream()
		require.NoError(t, err)
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: 30000, Per: time.Minute}, 30000)
		require.NoError(t, err)
		client := &http.Client{Transport: egress.NewTransport(base, egress.WithLimiter(throttle.All(tb)), egress.WithUpstream(u),
			egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{2000}, nil }))}
		resp, err := client.Get("http://api.test/v1")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, egress.Settle(resp, 1500))

		got := map[string]throttle.Statement{}
		for _, s := range u.Stated("api.test") {
			got[s.Name] = s
		}
		assert.Equal(t, throttle.UnitRequests, got["requests"].Unit)
		assert.Equal(t, 500, got["requests"].Limit)
		assert.Equal(t, "tokens", got["tokens"].Unit)
		assert.Equal(t, 28000, got["tokens"].Remaining)
		st, err := tb.Inspect(context.Background(), "api.test")
		require.NoError(t, err)
		assert.Equal(t, 30000-1500, st.Remaining)
	})
}

// TestEstimateWaitsOutAnUpstreamHold checks that with WithUpstream a
// statement "nothing left, full again at T" of a quota of 1 holds an
// estimated request back until T, and that its parts are booked then.
func TestEstimateWaitsOutAnUpstreamHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			if n > 0 {
				return respond(req, http.StatusOK), nil
			}
			return respond(req, http.StatusOK,
				"X-Ratelimit-Limit-Requests", "1", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "2s"), nil
		}}
		u, err := throttle.NewUpstream()
		require.NoError(t, err)
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: 10, Per: time.Hour}, 10)
		require.NoError(t, err)
		client := &http.Client{Transport: egress.NewTransport(base, egress.WithLimiter(throttle.All(tb, tb)), egress.WithUpstream(u),
			egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{1, 3}, nil }))}
		start := time.Now()
		for range 2 {
			resp, err := client.Get("http://api.test/v1")
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
		}
		sent := base.times()
		require.Len(t, sent, 2)
		assert.Equal(t, 2*time.Second, sent[1].Sub(start))
		st, err := tb.Inspect(context.Background(), "api.test")
		require.NoError(t, err)
		assert.Equal(t, 10-3-3, st.Remaining)
	})
}

// TestEstimateUpstreamHoldIsBounded checks that the record's hold on an
// estimated request keeps the call's bounds: beyond WithMaxWait, or past
// the context's deadline, it fails at once with a *throttle.LimitError,
// and a call the hold stops, so too one whose context ends during it,
// gives its parts back (it was never sent). The hold slept unbounded,
// until the context ended, and kept the estimate (found by a user's test).
func TestEstimateUpstreamHoldIsBounded(t *testing.T) {
	cases := []struct {
		name         string
		maxWait      time.Duration // 0: none
		timeout      time.Duration
		wantDeadline bool // a *throttle.LimitError, bound by the deadline
		wantCanceled bool // the context's error
	}{
		{name: "beyond the max wait", maxWait: 50 * time.Millisecond, timeout: time.Minute},
		{name: "past the deadline", timeout: 500 * time.Millisecond, wantDeadline: true},
		{name: "context ends during the hold", timeout: time.Minute, wantCanceled: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
					return respond(req, http.StatusOK,
						"X-Ratelimit-Limit-Tokens", "5000", "X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "30s"), nil
				}}
				u, err := throttle.NewUpstream()
				require.NoError(t, err)
				rpm := newTokenBucket(t, throttle.Rate{N: 100, Per: time.Minute}, 100)
				otpm := newTokenBucket(t, throttle.Rate{N: 5000, Per: time.Minute}, 5000)
				opts := []egress.Option{egress.WithLimiter(throttle.All(rpm, otpm)), egress.WithUpstream(u),
					egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{1, 1000}, nil })}
				if tc.maxWait > 0 {
					opts = append(opts, egress.WithMaxWait(tc.maxWait))
				}
				tr := egress.NewTransport(base, opts...)
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, "http://api.test/v1", nil))
				require.NoError(t, err)
				drainClose(t, resp) // the record heard: no tokens left for 30 s

				ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
				defer cancel()
				if tc.wantCanceled {
					time.AfterFunc(time.Second, cancel)
				}
				start := time.Now()
				_, err = tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "http://api.test/v1", nil))
				if tc.wantCanceled {
					require.ErrorIs(t, err, context.Canceled)
					assert.Equal(t, time.Second, time.Since(start))
				} else {
					var le *throttle.LimitError
					require.ErrorAs(t, err, &le)
					assert.Equal(t, tc.wantDeadline, le.Timeout(), "Timeout")
					assert.Zero(t, time.Since(start), "refused at once")
				}
				assert.Equal(t, 1, base.count(), "the second request is never sent")
				st, err := otpm.Inspect(context.Background(), "api.test")
				require.NoError(t, err)
				refill := int(5000 * time.Since(start) / time.Minute)
				assert.Equal(t, 5000-1000+refill, st.Remaining, "only the first call's estimate is kept")
			})
		})
	}
}

// TestEstimateOfARequestNeverSent checks that a call whose connection
// could not be made gives its estimate back (no response will ever settle
// it), and that one that failed after it may have reached the upstream
// keeps it, as a response never settled does. Five refused connections
// had emptied a bucket of 5000 tokens (found by a user's test).
func TestEstimateOfARequestNeverSent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantSpent int
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, 0},
		{"connection lost after sending", io.ErrUnexpectedEOF, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			otpm := newTokenBucket(t, throttle.Rate{N: 5000, Per: time.Hour}, 5000)
			base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, tc.err })
			tr := egress.NewTransport(base, egress.WithLimiter(throttle.All(otpm)),
				egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{1000}, nil }))
			_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, "http://api.test/v1", nil))
			require.ErrorIs(t, err, tc.err)
			st, err := otpm.Inspect(context.Background(), "api.test")
			require.NoError(t, err)
			assert.Equal(t, 5000-tc.wantSpent, st.Remaining)
		})
	}
}

// TestSettleWithTheBasesOwnRequest checks that Settle finds the booking
// when the base answers with a request of its own, as a cache or a mock
// may: it found nothing, and the estimate stayed (found by a user's test).
func TestSettleWithTheBasesOwnRequest(t *testing.T) {
	otpm := newTokenBucket(t, throttle.Rate{N: 5000, Per: time.Hour}, 5000)
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		own, err := http.NewRequest(http.MethodPost, "http://cache.internal/v1", nil)
		if err != nil {
			return nil, err
		}
		return respond(own, http.StatusOK), nil
	})
	tr := egress.NewTransport(base, egress.WithLimiter(throttle.All(otpm)),
		egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{1000}, nil }))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, "http://api.test/v1", nil))
	require.NoError(t, err)
	drainClose(t, resp)
	assert.Equal(t, "cache.internal", resp.Request.URL.Host, "the base's request is kept")
	require.NoError(t, egress.Settle(resp, 100))
	st, err := otpm.Inspect(context.Background(), "api.test")
	require.NoError(t, err)
	assert.Equal(t, 5000-100, st.Remaining)
}
