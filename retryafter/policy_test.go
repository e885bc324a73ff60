package retryafter_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/retryafter"
)

// Jitter sources for deterministic tests.
var (
	noJitter   = func(time.Duration) time.Duration { return 0 }
	halfJitter = func(max time.Duration) time.Duration { return max / 2 }
	fullJitter = func(max time.Duration) time.Duration { return max }
	negJitter  = func(time.Duration) time.Duration { return -time.Hour }
	hugeJitter = func(time.Duration) time.Duration { return time.Hour }
)

// newRequest returns a request whose body is replayable (GetBody set) when
// replay is true, and a one-shot stream otherwise.
func newRequest(method, body string, replay bool, kv ...string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
		if !replay {
			r = io.MultiReader(bytes.NewBufferString(body)) // hides the type from http.NewRequest
		}
	}
	req, err := http.NewRequest(method, "https://api.example.com/v1", r)
	if err != nil {
		panic(err)
	}
	req.Header = header(kv...)
	return req
}

func response(status int, kv ...string) *http.Response {
	return &http.Response{StatusCode: status, Header: header(kv...)}
}

func TestPolicyNext(t *testing.T) {
	get := newRequest(http.MethodGet, "", false)
	post := newRequest(http.MethodPost, `{"a":1}`, true)
	tests := []struct {
		name        string
		givePolicy  retryafter.Policy
		giveReq     *http.Request
		giveResp    *http.Response
		giveAttempt int
		wantWait    time.Duration
		wantRetry   bool
	}{
		// Server delays, with jitter only on top.
		{
			name:       "429 Retry-After, jitter added",
			givePolicy: retryafter.Policy{Jitter: halfJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "2"), giveAttempt: 1,
			wantWait: 2100 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "jitter at most a tenth",
			givePolicy: retryafter.Policy{Jitter: hugeJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "2"), giveAttempt: 1,
			wantWait: 2200 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "jitter at most one second",
			givePolicy: retryafter.Policy{Jitter: fullJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "20"), giveAttempt: 1,
			wantWait: 21 * time.Second, wantRetry: true,
		},
		{
			name:       "jitter never subtracts",
			givePolicy: retryafter.Policy{Jitter: negJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "2"), giveAttempt: 1,
			wantWait: 2 * time.Second, wantRetry: true,
		},
		{
			// Not at once: a server answering 429 with Retry-After: 0 every
			// time was sent all of MaxAttempts back to back.
			name:       "Retry-After 0 backs off locally",
			givePolicy: retryafter.Policy{Jitter: fullJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "0"), giveAttempt: 1,
			wantWait: 150 * time.Millisecond, wantRetry: true, // DefaultBackoffBase, jittered to one and a half times
		},
		{
			name:       "Retry-After 0 backs off by the attempt",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "0"), giveAttempt: 3,
			wantWait: 200 * time.Millisecond, wantRetry: true, // the third attempt's 400ms, jittered to half
		},
		{
			name:       "Retry-After date already past backs off locally",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(503, "Retry-After", "Mon, 01 Jan 2001 00:00:00 GMT"), giveAttempt: 1,
			wantWait: 50 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "a short positive delay is the server's",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "0", "retry-after-ms", "5"), giveAttempt: 1,
			wantWait: 5 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "quota reset on a 429",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1.5s"), giveAttempt: 1,
			wantWait: 1500 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "delay over MaxDelay returns at once",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "31"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "114 hours returns at once",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "410400"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "delay at MaxDelay, jitter capped",
			givePolicy: retryafter.Policy{Jitter: fullJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "30"), giveAttempt: 1,
			wantWait: 30 * time.Second, wantRetry: true,
		},
		{
			name:       "custom MaxDelay",
			givePolicy: retryafter.Policy{MaxDelay: 2 * time.Minute, Jitter: noJitter},
			giveReq:    get, giveResp: response(503, "Retry-After", "90"), giveAttempt: 1,
			wantWait: 90 * time.Second, wantRetry: true,
		},

		// Methods and bodies.
		{
			name:       "POST 429 is retried",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    post, giveResp: response(429, "Retry-After", "1"), giveAttempt: 1,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "POST 503 is not retried",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    post, giveResp: response(503, "Retry-After", "1"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "POST 529 is not retried",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    post, giveResp: response(529), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "POST 503 with Idempotency-Key",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    newRequest(http.MethodPost, "{}", true, "Idempotency-Key", "abc"), giveResp: response(503, "Retry-After", "1"), giveAttempt: 1,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "POST 503 with X-Idempotency-Key",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    newRequest(http.MethodPost, "{}", true, "X-Idempotency-Key", "abc"), giveResp: response(503, "Retry-After", "1"), giveAttempt: 1,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "POST 529 with RetryNonIdempotent",
			givePolicy: retryafter.Policy{RetryNonIdempotent: true, Jitter: noJitter},
			giveReq:    post, giveResp: response(529, "Retry-After", "1"), giveAttempt: 1,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "PUT 503",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    newRequest(http.MethodPut, "x", true), giveResp: response(503, "Retry-After", "1"), giveAttempt: 1,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "DELETE 503",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    newRequest(http.MethodDelete, "", false), giveResp: response(503, "Retry-After", "1"), giveAttempt: 1,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "PATCH 503",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    newRequest(http.MethodPatch, "x", true), giveResp: response(503, "Retry-After", "1"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "body cannot be replayed",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    newRequest(http.MethodPost, "x", false), giveResp: response(429, "Retry-After", "1"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "body cannot be replayed even with RetryNonIdempotent",
			givePolicy: retryafter.Policy{RetryNonIdempotent: true, Jitter: noJitter},
			giveReq:    newRequest(http.MethodPut, "x", false), giveResp: response(503, "Retry-After", "1"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "http.NoBody",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    &http.Request{Method: http.MethodPost, Body: http.NoBody, Header: http.Header{}}, giveResp: response(429, "Retry-After", "1"), giveAttempt: 1,
			wantWait: time.Second, wantRetry: true,
		},

		// Attempts.
		{
			name:       "attempt 3 of 4",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "1"), giveAttempt: 3,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "attempt 4 of 4",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "1"), giveAttempt: 4,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "MaxAttempts 1 disables retries",
			givePolicy: retryafter.Policy{MaxAttempts: 1, Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "1"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "attempt 0 counts as 1",
			givePolicy: retryafter.Policy{MaxAttempts: 2, Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "1"), giveAttempt: 0,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "negative MaxAttempts is the default",
			givePolicy: retryafter.Policy{MaxAttempts: -1, Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "1"), giveAttempt: 3,
			wantWait: time.Second, wantRetry: true,
		},

		// Statuses.
		{
			name:       "500 is not in the defaults",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(500, "Retry-After", "1"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "200",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(200), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "custom Statuses",
			givePolicy: retryafter.Policy{Statuses: []int{500}, Jitter: halfJitter},
			giveReq:    get, giveResp: response(500), giveAttempt: 1,
			wantWait: 100 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "empty Statuses retries nothing",
			givePolicy: retryafter.Policy{Statuses: []int{}, Jitter: noJitter},
			giveReq:    get, giveResp: response(429, "Retry-After", "1"), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "plain 403 never retried",
			givePolicy: retryafter.Policy{Statuses: []int{403}, Jitter: noJitter},
			giveReq:    get, giveResp: response(403), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "throttling 403 retried when listed",
			givePolicy: retryafter.Policy{Statuses: []int{403}, Jitter: noJitter},
			giveReq:    get, giveResp: response(403, "retry-after", "3"), giveAttempt: 1,
			wantWait: 3 * time.Second, wantRetry: true,
		},

		// Local backoff, without a server delay.
		{
			name:       "backoff attempt 1",
			givePolicy: retryafter.Policy{Jitter: halfJitter},
			giveReq:    get, giveResp: response(503), giveAttempt: 1,
			wantWait: 100 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "backoff attempt 2",
			givePolicy: retryafter.Policy{Jitter: halfJitter},
			giveReq:    get, giveResp: response(429), giveAttempt: 2,
			wantWait: 200 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "backoff attempt 3, least jitter",
			givePolicy: retryafter.Policy{Jitter: noJitter},
			giveReq:    get, giveResp: response(529), giveAttempt: 3,
			wantWait: 200 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "backoff attempt 3, most jitter",
			givePolicy: retryafter.Policy{Jitter: fullJitter},
			giveReq:    get, giveResp: response(529), giveAttempt: 3,
			wantWait: 600 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "backoff capped at MaxDelay",
			givePolicy: retryafter.Policy{MaxAttempts: 100, MaxDelay: time.Second, Jitter: fullJitter},
			giveReq:    get, giveResp: response(429), giveAttempt: 50,
			wantWait: time.Second, wantRetry: true,
		},
		{
			name:       "backoff with a huge MaxDelay does not overflow",
			givePolicy: retryafter.Policy{MaxAttempts: 1000, MaxDelay: 1<<63 - 1, Jitter: fullJitter},
			giveReq:    get, giveResp: response(429), giveAttempt: 999,
			wantWait: 1<<63 - 1, wantRetry: true,
		},
		{
			name:       "cached quota headers are no delay",
			givePolicy: retryafter.Policy{Jitter: halfJitter},
			giveReq:    get, giveResp: response(429, "Age", "20", "RateLimit", `"default";r=0;t=10`), giveAttempt: 1,
			wantWait: 100 * time.Millisecond, wantRetry: true,
		},
		{
			name:       "custom Backoff",
			givePolicy: retryafter.Policy{Backoff: func(a int) time.Duration { return time.Duration(a) * time.Second }},
			giveReq:    get, giveResp: response(503), giveAttempt: 3,
			wantWait: 3 * time.Second, wantRetry: true,
		},
		{
			name:       "custom Backoff negative",
			givePolicy: retryafter.Policy{Backoff: func(int) time.Duration { return -time.Second }},
			giveReq:    get, giveResp: response(503), giveAttempt: 1,
			wantWait: 0, wantRetry: true,
		},
		{
			name:       "custom Backoff capped",
			givePolicy: retryafter.Policy{Backoff: func(int) time.Duration { return time.Hour }},
			giveReq:    get, giveResp: response(503), giveAttempt: 1,
			wantWait: retryafter.DefaultMaxDelay, wantRetry: true,
		},

		// Nothing to go on.
		{
			name:       "nil response",
			givePolicy: retryafter.Policy{},
			giveReq:    get, giveResp: nil, giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
		{
			name:       "nil request",
			givePolicy: retryafter.Policy{},
			giveReq:    nil, giveResp: response(429), giveAttempt: 1,
			wantWait: 0, wantRetry: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotWait, gotRetry := tt.givePolicy.Next(tt.giveReq, tt.giveResp, tt.giveAttempt, serverNow)
			assert.Equal(t, tt.wantWait, gotWait)
			assert.Equal(t, tt.wantRetry, gotRetry)
		})
	}
}

func TestPolicyNextDefaultJitterStaysInRange(t *testing.T) {
	var p retryafter.Policy
	req := newRequest(http.MethodGet, "", false)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				wait, retry := p.Next(req, response(429, "Retry-After", "5"), 1, serverNow)
				assert.True(t, retry)
				assert.GreaterOrEqual(t, wait, 5*time.Second)
				assert.Less(t, wait, 5500*time.Millisecond)

				wait, retry = p.Next(req, response(503), 2, serverNow)
				assert.True(t, retry)
				assert.GreaterOrEqual(t, wait, 100*time.Millisecond)
				assert.Less(t, wait, 300*time.Millisecond)
			}
		})
	}
	wg.Wait()
}

func TestPolicyPause(t *testing.T) {
	tests := []struct {
		name       string
		givePolicy retryafter.Policy
		giveResp   *http.Response
		wantPause  time.Duration
		wantOK     bool
	}{
		{name: "429 Retry-After", giveResp: response(429, "Retry-After", "30"), wantPause: 30 * time.Second, wantOK: true},
		{name: "429 beyond MaxDelay still pauses", giveResp: response(429, "Retry-After", "45"), wantPause: 45 * time.Second, wantOK: true},
		{name: "capped at MaxPause", giveResp: response(429, "Retry-After", "600"), wantPause: retryafter.DefaultMaxPause, wantOK: true},
		{name: "114 hours capped", giveResp: response(429, "Retry-After", "410400"), wantPause: retryafter.DefaultMaxPause, wantOK: true},
		{name: "custom MaxPause", givePolicy: retryafter.Policy{MaxPause: 10 * time.Second}, giveResp: response(429, "Retry-After", "600"), wantPause: 10 * time.Second, wantOK: true},
		{name: "429 without delay stays local", giveResp: response(429)},
		{name: "429 Retry-After 0", giveResp: response(429, "Retry-After", "0")},
		{name: "503 Retry-After", giveResp: response(503, "Retry-After", "5"), wantPause: 5 * time.Second, wantOK: true},
		{name: "529 quota reset", giveResp: response(529, "anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2013-07-01T17:27:16Z", "Date", serverDate), wantPause: 10 * time.Second, wantOK: true},
		{name: "403 GitHub primary", giveResp: response(403, "Date", serverDate, "x-ratelimit-remaining", "0", "x-ratelimit-reset", "1372699636"), wantPause: 10 * time.Second, wantOK: true},
		{name: "403 secondary", giveResp: response(403, "retry-after", "20"), wantPause: 20 * time.Second, wantOK: true},
		{name: "plain 403", giveResp: response(403)},
		{name: "200 spent the last unit", giveResp: response(200, "Date", serverDate, "x-ratelimit-remaining", "0", "x-ratelimit-reset", "1372699686"), wantPause: time.Minute, wantOK: true},
		{name: "200 with remaining", giveResp: response(200, "Date", serverDate, "x-ratelimit-remaining", "5", "x-ratelimit-reset", "1372699686")},
		{name: "200 with IETF r=0", giveResp: response(200, "RateLimit", `"default";r=0;t=30`), wantPause: 30 * time.Second, wantOK: true},
		{name: "200 with IETF r omitted", giveResp: response(200, "RateLimit", `"default";t=30`)},
		{name: "200 with Retry-After is not throttling", giveResp: response(200, "Retry-After", "30")},
		{name: "500 with Retry-After", giveResp: response(500, "Retry-After", "30")},
		{name: "200 cached", giveResp: response(200, "Age", "1", "x-ratelimit-remaining", "0", "x-ratelimit-reset", "30")},
		{name: "200 OpenAI tokens out", giveResp: response(200, "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s"), wantPause: retryafter.DefaultMaxPause, wantOK: true},
		{name: "nil", giveResp: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotPause, gotOK := tt.givePolicy.Pause(tt.giveResp, serverNow)
			assert.Equal(t, tt.wantPause, gotPause)
			assert.Equal(t, tt.wantOK, gotOK)
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		give    retryafter.Policy
		wantErr string
	}{
		{name: "zero", give: retryafter.Policy{}},
		{name: "disabled", give: retryafter.Policy{MaxAttempts: 1}},
		{name: "custom", give: retryafter.Policy{MaxAttempts: 10, MaxDelay: time.Minute, MaxPause: time.Hour, Statuses: []int{429, 500}}},
		{name: "negative MaxAttempts", give: retryafter.Policy{MaxAttempts: -1}, wantErr: "retryafter: Policy.MaxAttempts is -1, want 0 (the default) or more"},
		{name: "negative MaxDelay", give: retryafter.Policy{MaxDelay: -time.Second}, wantErr: "retryafter: Policy.MaxDelay is -1s, want 0 (the default) or more"},
		{name: "negative MaxPause", give: retryafter.Policy{MaxPause: -time.Second}, wantErr: "retryafter: Policy.MaxPause is -1s, want 0 (the default) or more"},
		{name: "bad status", give: retryafter.Policy{Statuses: []int{429, 42}}, wantErr: "retryafter: Policy.Statuses holds 42, which is not an HTTP status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			assert.Equal(t, tt.wantErr, errString(err))
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestDefaultStatusesIsACopy(t *testing.T) {
	s := retryafter.DefaultStatuses()
	require.Equal(t, []int{429, 503, 529}, s)
	s[0] = 500
	assert.Equal(t, []int{429, 503, 529}, retryafter.DefaultStatuses())
}

// Next and Pause agree: whenever Next waits on a server delay, Pause
// pauses the key for that delay, capped at MaxPause; when the delay is too
// long for Next, the response returns at once and Pause still pauses.
func TestPolicyNextAndPauseAgree(t *testing.T) {
	p := retryafter.Policy{Jitter: noJitter}
	req := newRequest(http.MethodGet, "", false)
	tests := []struct {
		give      string
		wantWait  time.Duration
		wantRetry bool
		wantPause time.Duration
	}{
		{give: "1", wantWait: time.Second, wantRetry: true, wantPause: time.Second},
		{give: "30", wantWait: 30 * time.Second, wantRetry: true, wantPause: 30 * time.Second},
		{give: "31", wantWait: 0, wantRetry: false, wantPause: 31 * time.Second},
		{give: "60", wantWait: 0, wantRetry: false, wantPause: time.Minute},
		{give: "3600", wantWait: 0, wantRetry: false, wantPause: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			resp := response(429, "Retry-After", tt.give)
			gotWait, gotRetry := p.Next(req, resp, 1, serverNow)
			gotPause, gotPaused := p.Pause(resp, serverNow)
			assert.Equal(t, tt.wantWait, gotWait)
			assert.Equal(t, tt.wantRetry, gotRetry)
			assert.Equal(t, tt.wantPause, gotPause)
			assert.True(t, gotPaused)
		})
	}
}

// TestPolicyNextShouldRetry: a server that says whether to retry is
// heard. X-Should-Retry (OpenAI, Anthropic) or Stripe-Should-Retry "true"
// makes a non-idempotent request retryable on a status in Statuses, and
// "false" vetoes the retry even of a 429; the status rules still hold.
func TestPolicyNextShouldRetry(t *testing.T) {
	p := retryafter.Policy{Jitter: noJitter}
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name      string
		method    string
		status    int
		kv        []string
		wantRetry bool
	}{
		{"POST 503, nothing said", http.MethodPost, 503, nil, false},
		{"POST 503, x-should-retry: true", http.MethodPost, 503, []string{"x-should-retry", "true"}, true},
		{"POST 529, x-should-retry: TRUE", http.MethodPost, 529, []string{"X-Should-Retry", " TRUE "}, true},
		{"POST 503, Stripe-Should-Retry: true", http.MethodPost, 503, []string{"Stripe-Should-Retry", "true"}, true},
		{"GET 503, x-should-retry: false", http.MethodGet, 503, []string{"x-should-retry", "false"}, false},
		{"GET 429, Stripe-Should-Retry: false", http.MethodGet, 429, []string{"Stripe-Should-Retry", "false", "Retry-After", "1"}, false},
		{"GET 503, x-should-retry: maybe", http.MethodGet, 503, []string{"x-should-retry", "maybe"}, true},
		{"POST 400, x-should-retry: true", http.MethodPost, 400, []string{"x-should-retry", "true"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(tt.method, `{"a":1}`, true)
			_, retry := p.Next(req, response(tt.status, tt.kv...), 1, now)
			assert.Equal(t, tt.wantRetry, retry)
		})
	}
}
