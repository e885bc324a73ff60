package llmupstream_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/internal/llmupstream"
)

// post sends req to api and returns the recorded reply.
func post(t *testing.T, api http.Handler, req llmupstream.Request) *httptest.ResponseRecorder {
	t.Helper()
	raw, err := json.Marshal(req)
	require.NoError(t, err)
	return postRaw(api, http.MethodPost, llmupstream.Path, string(raw))
}

func postRaw(api http.Handler, method, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}

// remaining reads the three remaining headers: requests, input, output.
func remaining(t *testing.T, h http.Header) [3]int {
	t.Helper()
	var got [3]int
	for i, name := range []string{"requests", "input-tokens", "output-tokens"} {
		n, err := strconv.Atoi(h.Get("anthropic-ratelimit-" + name + "-remaining"))
		require.NoError(t, err, name)
		got[i] = n
	}
	return got
}

func TestAdmission(t *testing.T) {
	limits := llmupstream.Limits{Requests: 3, InputTokens: 1000, OutputTokens: 1000, Period: 10 * time.Second}
	type step struct {
		giveAfter      time.Duration // sleep this long first
		giveReq        llmupstream.Request
		wantStatus     int
		wantRetryAfter string
		wantRemaining  [3]int // after the decision
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "requests: the fourth waits for one request's refill",
			steps: []step{
				{giveReq: llmupstream.Request{MaxTokens: 1}, wantStatus: 200, wantRemaining: [3]int{2, 1000, 999}},
				{giveReq: llmupstream.Request{MaxTokens: 1}, wantStatus: 200, wantRemaining: [3]int{1, 1000, 998}},
				{giveReq: llmupstream.Request{MaxTokens: 1}, wantStatus: 200, wantRemaining: [3]int{0, 1000, 997}},
				{giveReq: llmupstream.Request{MaxTokens: 1}, wantStatus: 429, wantRetryAfter: "4", wantRemaining: [3]int{0, 1000, 997}},
				{giveAfter: 3333 * time.Millisecond, giveReq: llmupstream.Request{MaxTokens: 1}, wantStatus: 429, wantRetryAfter: "1", wantRemaining: [3]int{0, 1000, 1000}},
				{giveAfter: time.Millisecond, giveReq: llmupstream.Request{MaxTokens: 1}, wantStatus: 200, wantRemaining: [3]int{0, 1000, 999}},
			},
		},
		{
			name: "input tokens: prompt_tokens must fit at the start",
			steps: []step{
				{giveReq: llmupstream.Request{PromptTokens: 800, MaxTokens: 1}, wantStatus: 200, wantRemaining: [3]int{2, 200, 999}},
				{giveReq: llmupstream.Request{PromptTokens: 300, MaxTokens: 1}, wantStatus: 429, wantRetryAfter: "1", wantRemaining: [3]int{2, 200, 999}},
				{giveAfter: time.Second, giveReq: llmupstream.Request{PromptTokens: 300, MaxTokens: 1}, wantStatus: 200, wantRemaining: [3]int{1, 0, 999}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api, err := llmupstream.New(llmupstream.Config{Limits: limits})
				require.NoError(t, err)
				for i, s := range tt.steps {
					time.Sleep(s.giveAfter)
					rec := post(t, api, s.giveReq)
					assert.Equal(t, s.wantStatus, rec.Code, "step %d", i)
					assert.Equal(t, s.wantRetryAfter, rec.Header().Get("Retry-After"), "step %d", i)
					assert.Equal(t, s.wantRemaining, remaining(t, rec.Header()), "step %d", i)
				}
			})
		})
	}
}

// TestOutputHeldUntilDone checks Anthropic's rule for output tokens:
// max_tokens is taken when a request starts, and what it overestimated is
// given back when the reply is complete.
func TestOutputHeldUntilDone(t *testing.T) {
	tests := []struct {
		name       string
		giveStream bool
	}{
		{name: "JSON reply"},
		{name: "streamed reply", giveStream: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// 2000 output tokens per 100 s: 20 a second.
				api, err := llmupstream.New(llmupstream.Config{
					Limits:     llmupstream.Limits{Requests: 10, InputTokens: 1000, OutputTokens: 2000, Period: 100 * time.Second},
					FirstToken: time.Second, PerToken: time.Millisecond,
				})
				require.NoError(t, err)
				first := llmupstream.Request{MaxTokens: 1600, Seed: 1, Stream: tt.giveStream}
				out := llmupstream.Output(first.MaxTokens, first.Seed)
				done := make(chan *httptest.ResponseRecorder, 1)
				go func() { done <- post(t, api, first) }()
				synctest.Wait() // the first reply is being generated

				rec := post(t, api, llmupstream.Request{MaxTokens: 600, Seed: 2})
				assert.Equal(t, http.StatusTooManyRequests, rec.Code)
				assert.Equal(t, "10", rec.Header().Get("Retry-After"), "200 tokens short at 20/s")
				assert.Equal(t, 400, remaining(t, rec.Header())[2])
				assert.Equal(t, 1, api.Stats().InFlight)

				took := time.Second + time.Duration(out)*time.Millisecond
				rec = <-done
				require.Equal(t, http.StatusOK, rec.Code)
				synctest.Wait()
				assert.Equal(t, 0, api.Stats().InFlight)
				// Back: the refill while it ran, and 1600 − out.
				want := 400 + int(took/(50*time.Millisecond)) + first.MaxTokens - out
				rec = post(t, api, llmupstream.Request{MaxTokens: 2000})
				assert.Equal(t, http.StatusTooManyRequests, rec.Code)
				assert.Equal(t, want, remaining(t, rec.Header())[2])
				st := api.Stats()
				assert.Equal(t, out, st.OutputTokens)
				assert.Equal(t, 1, st.Requests)
				assert.Equal(t, 2, st.TooMany)
			})
		})
	}
}
