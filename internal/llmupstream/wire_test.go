package llmupstream_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
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
	"github.com/egress-go/egress/retryafter"
)

var testLimits = llmupstream.Limits{Requests: 10, InputTokens: 5000, OutputTokens: 4000, Period: 10 * time.Second}

func newAPI(t *testing.T) *llmupstream.API {
	t.Helper()
	api, err := llmupstream.New(llmupstream.Config{Limits: testLimits})
	require.NoError(t, err)
	return api
}

func TestNewRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name      string
		giveCfg   llmupstream.Config
		wantError string
	}{
		{"no requests", llmupstream.Config{Limits: llmupstream.Limits{InputTokens: 1, OutputTokens: 1}}, "llmupstream: Limits.Requests is 0, want 1 or more"},
		{"negative input", llmupstream.Config{Limits: llmupstream.Limits{Requests: 1, InputTokens: -5, OutputTokens: 1}}, "llmupstream: Limits.InputTokens is -5, want 1 or more"},
		{"no output", llmupstream.Config{Limits: llmupstream.Limits{Requests: 1, InputTokens: 1}}, "llmupstream: Limits.OutputTokens is 0, want 1 or more"},
		{"negative period", llmupstream.Config{Limits: llmupstream.Limits{Requests: 1, InputTokens: 1, OutputTokens: 1, Period: -time.Second}}, "llmupstream: Limits.Period is -1s, want 0 or more"},
		{"negative per token", llmupstream.Config{Limits: testLimits, PerToken: -time.Millisecond}, "llmupstream: PerToken is -1ms, want 0 or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := llmupstream.New(tt.giveCfg)
			assert.EqualError(t, err, tt.wantError)
		})
	}
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		name        string
		giveMethod  string
		givePath    string
		giveBody    string
		wantStatus  int
		wantMessage string
	}{
		{"not JSON", http.MethodPost, llmupstream.Path, "hello", 400, "body is not a valid request"},
		{"unknown field", http.MethodPost, llmupstream.Path, `{"max_tokens": 5, "prompt": "hi"}`, 400, `unknown field "prompt"`},
		{"no max_tokens", http.MethodPost, llmupstream.Path, `{"prompt_tokens": 5}`, 400, "max_tokens is 0, want 1 or more"},
		{"negative prompt", http.MethodPost, llmupstream.Path, `{"prompt_tokens": -1, "max_tokens": 5}`, 400, "prompt_tokens is -1, want 0 or more"},
		{"prompt beyond the limit", http.MethodPost, llmupstream.Path, `{"prompt_tokens": 5001, "max_tokens": 5}`, 400, "prompt_tokens is 5001, above the input-tokens limit of 5000 per 10s"},
		{"max_tokens beyond the limit", http.MethodPost, llmupstream.Path, `{"max_tokens": 4001}`, 400, "max_tokens is 4001, above the output-tokens limit of 4000 per 10s"},
		{"wrong path", http.MethodPost, "/v1/complete", `{"max_tokens": 5}`, 404, `no such path "/v1/complete"`},
		{"wrong method", http.MethodGet, llmupstream.Path, "", 405, "method GET; want POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newAPI(t)
			rec := postRaw(api, tt.giveMethod, tt.givePath, tt.giveBody)
			assert.Equal(t, tt.wantStatus, rec.Code)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
			assert.Equal(t, "error", e.Type)
			assert.Contains(t, e.Error.Message, tt.wantMessage)
			assert.Zero(t, api.Stats().Requests, "nothing admitted")
		})
	}
}

func TestHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI(t)
		start := time.Now()
		rec := post(t, api, llmupstream.Request{PromptTokens: 2500, MaxTokens: 1, Seed: 3})
		require.Equal(t, http.StatusOK, rec.Code)
		want := map[string]string{
			"Anthropic-Ratelimit-Requests-Limit":          "10",
			"Anthropic-Ratelimit-Requests-Remaining":      "9",
			"Anthropic-Ratelimit-Requests-Reset":          start.Add(time.Second).UTC().Format(time.RFC3339Nano),
			"Anthropic-Ratelimit-Input-Tokens-Limit":      "5000",
			"Anthropic-Ratelimit-Input-Tokens-Remaining":  "2500",
			"Anthropic-Ratelimit-Input-Tokens-Reset":      start.Add(5 * time.Second).UTC().Format(time.RFC3339Nano),
			"Anthropic-Ratelimit-Output-Tokens-Limit":     "4000",
			"Anthropic-Ratelimit-Output-Tokens-Remaining": "3999",
			// 1 token at 400/s: 2.5 ms.
			"Anthropic-Ratelimit-Output-Tokens-Reset": start.Add(3 * time.Millisecond).UTC().Format(time.RFC3339Nano),
			"Content-Type": "application/json",
		}
		for name, v := range want {
			assert.Equal(t, v, rec.Header().Get(name), name)
		}
		assert.Empty(t, rec.Header().Get("Retry-After"))
		_, err := time.Parse(time.RFC3339, rec.Header().Get("Anthropic-Ratelimit-Output-Tokens-Reset"))
		assert.NoError(t, err, "reset is RFC 3339")
	})
}

func TestReplyBodies(t *testing.T) {
	tests := []struct {
		name       string
		giveStream bool
		wantType   string
		wantEvents []string
		wantInBody string
	}{
		{name: "JSON", wantType: "application/json", wantInBody: `"type":"message"`},
		{
			name: "stream", giveStream: true, wantType: "text/event-stream",
			// 300 tokens in pieces of 64.
			wantEvents: []string{"message_start", "content_block_delta", "content_block_delta", "content_block_delta",
				"content_block_delta", "content_block_delta", "message_delta", "message_stop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newAPI(t)
			seed := seedFor(t, 1000, 300)
			rec := post(t, api, llmupstream.Request{PromptTokens: 40, MaxTokens: 1000, Seed: seed, Stream: tt.giveStream})
			require.Equal(t, http.StatusOK, rec.Code)
			assert.Equal(t, tt.wantType, rec.Header().Get("Content-Type"))
			assert.Contains(t, rec.Body.String(), tt.wantInBody)
			assert.Equal(t, tt.wantEvents, events(t, rec.Body.String()))
			u, err := llmupstream.ReadUsage(bytes.NewReader(rec.Body.Bytes()), tt.giveStream)
			require.NoError(t, err)
			assert.Equal(t, llmupstream.Usage{InputTokens: 40, OutputTokens: 300}, u)
			assert.Equal(t, 300, api.Stats().OutputTokens)
		})
	}
}

// seedFor finds a seed whose output for maxTokens is want.
func seedFor(t *testing.T, maxTokens, want int) uint64 {
	t.Helper()
	for s := uint64(1); s < 100000; s++ {
		if llmupstream.Output(maxTokens, s) == want {
			return s
		}
	}
	t.Fatalf("no seed gives %d of %d", want, maxTokens)
	return 0
}

// events lists the event names of a server-sent event stream.
func events(t *testing.T, body string) []string {
	t.Helper()
	var names []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			names = append(names, name)
		}
	}
	require.NoError(t, sc.Err())
	return names
}

func TestReadUsageRefuses(t *testing.T) {
	tests := []struct {
		name       string
		giveBody   string
		giveStream bool
		wantError  string
	}{
		{"error body", `{"type":"error","error":{"type":"rate_limit_error","message":"x"}}`, false, "llmupstream: the body ended without a usage"},
		{"not JSON", `<html>`, false, "llmupstream: reading the reply: invalid character '<' looking for beginning of value"},
		{"stream cut before the usage", "event: message_start\ndata: {\"type\":\"message_start\"}\n\n", true, "llmupstream: the body ended without a usage"},
		{"bad event", "event: message_delta\ndata: {\n\n", true, "llmupstream: reading an event: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := llmupstream.ReadUsage(strings.NewReader(tt.giveBody), tt.giveStream)
			assert.EqualError(t, err, tt.wantError)
		})
	}
}

func TestOutput(t *testing.T) {
	tests := []struct {
		giveMax        int
		wantLo, wantHi int
	}{
		{giveMax: 1, wantLo: 1, wantHi: 1},
		{giveMax: 10, wantLo: 1, wantHi: 5},
		{giveMax: 1000, wantLo: 100, wantHi: 500},
	}
	for _, tt := range tests {
		t.Run(strconvI(tt.giveMax), func(t *testing.T) {
			seen := map[int]bool{}
			sum := 0
			const n = 2000
			for s := range uint64(n) {
				out := llmupstream.Output(tt.giveMax, s)
				assert.Equal(t, out, llmupstream.Output(tt.giveMax, s), "the same for the same seed")
				seen[out] = true
				sum += out
			}
			assert.True(t, seen[tt.wantLo], "reaches the low end")
			assert.True(t, seen[tt.wantHi], "reaches the high end")
			for out := range seen {
				assert.GreaterOrEqual(t, out, tt.wantLo)
				assert.LessOrEqual(t, out, tt.wantHi)
			}
			assert.InDelta(t, float64(tt.wantLo+tt.wantHi)/2, float64(sum)/n, float64(tt.wantHi-tt.wantLo)/20+0.01, "uniform")
		})
	}
}

func strconvI(n int) string { return "max_tokens=" + strconv.Itoa(n) }

func TestStatsWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI(t)
		req := llmupstream.Request{PromptTokens: 100, MaxTokens: 10, Seed: 5}
		out := llmupstream.Output(10, 5)
		post(t, api, req)
		time.Sleep(10 * time.Second)
		post(t, api, req)
		post(t, api, llmupstream.Request{PromptTokens: 5000, MaxTokens: 10}) // refused: 4900 input left
		time.Sleep(25 * time.Second)
		post(t, api, req)
		st := api.Stats()
		assert.Equal(t, []llmupstream.Window{
			{Requests: 1, InputTokens: 100, OutputTokens: out},
			{Requests: 1, InputTokens: 100, OutputTokens: out, TooMany: 1},
			{},
			{Requests: 1, InputTokens: 100, OutputTokens: out},
		}, st.Windows)
		assert.Equal(t, 3, st.Requests)
		assert.Equal(t, 300, st.InputTokens)
		assert.Equal(t, 3*out, st.OutputTokens)
		assert.Equal(t, 1, st.TooMany)
		assert.Equal(t, 10*time.Second, st.Period)
	})
}

func TestNoDateHeader(t *testing.T) {
	srv := httptest.NewServer(newAPI(t))
	defer srv.Close()
	resp, err := http.Post(srv.URL+llmupstream.Path, "application/json", strings.NewReader(`{"max_tokens": 1}`))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Values("Date"), "no Date: its whole seconds are too coarse")
}

// TestHeadersReadByRetryafter checks that egress's own header reader
// understands the API: the three quotas, and the 429's delay.
func TestHeadersReadByRetryafter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI(t)
		rec := post(t, api, llmupstream.Request{PromptTokens: 4000, MaxTokens: 1, Seed: 1})
		require.Equal(t, http.StatusOK, rec.Code)
		qs := retryafter.ParseQuota(rec.Header(), time.Now())
		require.Len(t, qs, 3)
		tests := []struct {
			wantName      string
			wantLimit     int
			wantRemaining int
			wantReset     time.Duration
		}{
			{"requests", 10, 9, time.Second},
			{"input-tokens", 5000, 1000, 8 * time.Second},
			{"output-tokens", 4000, 3999, 3 * time.Millisecond}, // 2.5 ms, rounded up
		}
		for i, tt := range tests {
			assert.Equal(t, tt.wantName, qs[i].Name)
			assert.Equal(t, tt.wantLimit, qs[i].Limit, tt.wantName)
			assert.Equal(t, tt.wantRemaining, qs[i].Remaining, tt.wantName)
			assert.Equal(t, tt.wantReset, qs[i].Reset, tt.wantName)
		}
		_, waits := retryafter.Parse(rec.Header(), time.Now())
		assert.False(t, waits, "a 200 with quota left asks for no wait")

		rec = post(t, api, llmupstream.Request{PromptTokens: 4000, MaxTokens: 1, Seed: 2}) // 1000 input tokens left: 3000 short at 500/s
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		d, waits := retryafter.Parse(rec.Header(), time.Now())
		assert.True(t, waits)
		assert.Equal(t, 6*time.Second, d)
	})
}
