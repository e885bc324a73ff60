package retryafter_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/retryafter"
)

func FuzzParseValue(f *testing.F) {
	for _, tt := range parseValueTests() {
		f.Add(tt.give, int64(0))
	}
	for _, v := range invalidValues() {
		f.Add(v, int64(time.Hour))
	}
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", int64(-1<<63))
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", int64(1<<63-1))
	f.Fuzz(func(t *testing.T, v string, offset int64) {
		d, err := retryafter.ParseValue(v, rfcNow.Add(time.Duration(offset)))
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, retryafter.MaxDelayValue)
		if err != nil {
			assert.ErrorIs(t, err, retryafter.ErrInvalid)
			assert.Zero(t, d)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, tt := range parseTests() {
		f.Add(rawHeader(tt.giveH), tt.giveNow.UnixNano(), 429)
	}
	for _, tt := range parseQuotaTests() {
		f.Add(rawHeader(tt.giveH), tt.giveNow.UnixNano(), 200)
	}
	// Nasty values as real servers and proxies send them.
	for _, raw := range []string{
		"Retry-After: 1e400\n", "Retry-After: -0\n", "Retry-After: NaN\n", "Retry-After: 0x10\n",
		"Retry-After: 99999999999999999999999999999999\n", "Retry-After: 6m0s\n", "Retry-After: 2026-12-04T12:01:00Z\n",
		"Retry-After: Friday, 04-Dec-26 12:01:00 GMT\nDate: Fri, 04 Dec 2026 12:00:00 GMT\n",
		"Retry-After: Fri Dec  4 12:01:00 2026\nDate: Thu, 01 Jan 1970 00:00:00 GMT\n",
		"Retry-After-Ms: 0\nRetry-After: 20\n", "Retry-After-Ms: -1\n", "Retry-After-Ms: 1234.5678\n",
		"RateLimit: \"burst\";r=0;t=1.5\n", "RateLimit: \"burst\";r=0;t=-0.5\n", "RateLimit: \"burst\";r=0;t=999999999999999\n",
		"RateLimit: \"a\", \"b\";r=0;t=3;pk=:dXNlcjE=:;foo=bar\nRateLimit-Policy: \"b\";q=10;w=1;qu=\"content-bytes\"\n",
		"RateLimit: limit=100, remaining=0, reset=5\n",
		"RateLimit-Limit: 50, 10;w=1, 50;w=60\nRateLimit-Remaining: 0\nRateLimit-Reset: 20\n",
		"X-RateLimit-Limit: 50, 10;w=1, 50;w=60\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: 1470173023123\n",
		"X-RateLimit-Remaining: 0\nX-RateLimit-Reset: 1470173023.123\nX-RateLimit-Reset-After: 64.57\nX-RateLimit-Bucket: abcd\n",
		"X-RateLimit-Remaining: 0\nX-RateLimit-Reset: Mon, 01 Jul 2013 17:27:36 UTC\n",
		"X-Shopify-Shop-Api-Call-Limit: 2000000000000/1000000000000\n", "X-Shopify-Shop-Api-Call-Limit: 40/0\n",
		"x-ratelimit-remaining-tokens: 0\nx-ratelimit-reset-tokens: 2m59.56s\n",
		"x-ratelimit-remaining-tokens: -0\nx-ratelimit-reset-tokens: 9223372036854775807ns\n",
		"anthropic-ratelimit-tokens-remaining: 0\nanthropic-ratelimit-tokens-reset: 9999-12-31T23:59:59.999999999+14:00\n",
		"Age: 0\nX-Rate-Limit-Remaining: 0\nX-Rate-Limit-Reset: 1\n", "Age: -1\nAge: 5\nX-RateLimit-Remaining: 0\n",
	} {
		for _, status := range []int{429, 403, 503, 200} {
			f.Add(raw, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC).UnixNano(), status)
		}
	}
	f.Fuzz(func(t *testing.T, raw string, nowNanos int64, status int) {
		h := parseRawHeader(raw)
		now := time.Unix(0, nowNanos)

		d, ok := retryafter.Parse(h, now)
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, retryafter.MaxDelayValue)
		if !ok {
			assert.Zero(t, d)
		}

		for _, q := range retryafter.ParseQuota(h, now) {
			assert.GreaterOrEqual(t, q.Reset, time.Duration(0))
			assert.LessOrEqual(t, q.Reset, retryafter.MaxDelayValue)
			assert.GreaterOrEqual(t, q.Window, time.Duration(0))
			assert.GreaterOrEqual(t, q.Limit, retryafter.Unknown)
			assert.GreaterOrEqual(t, q.Remaining, retryafter.Unknown)
			assert.GreaterOrEqual(t, q.Precision, time.Duration(0))
			assert.LessOrEqual(t, q.Precision, time.Second)
			assert.Equal(t, q.Precision == 0, q.ResetAt.IsZero(), "a reset has both an instant and a precision, or neither")
		}

		resp := &http.Response{StatusCode: status, Header: h}
		_ = retryafter.Throttled(resp)
		var p retryafter.Policy
		pause, paused := p.Pause(resp, now)
		assert.GreaterOrEqual(t, pause, time.Duration(0))
		assert.LessOrEqual(t, pause, retryafter.DefaultMaxPause)
		assert.Equal(t, paused, pause > 0)
		req := &http.Request{Method: http.MethodGet, Header: http.Header{}}
		wait, _ := p.Next(req, resp, 1, now)
		assert.GreaterOrEqual(t, wait, time.Duration(0))
		assert.LessOrEqual(t, wait, retryafter.DefaultMaxDelay)
	})
}

func FuzzParseQuota(f *testing.F) {
	for _, tt := range parseQuotaTests() {
		f.Add(rawHeader(tt.giveH), tt.giveNow.UnixNano())
	}
	f.Fuzz(func(t *testing.T, raw string, nowNanos int64) {
		now := time.Unix(0, nowNanos)
		for _, q := range retryafter.ParseQuota(parseRawHeader(raw), now) {
			if !q.ResetAt.IsZero() {
				assert.False(t, q.ResetAt.After(now.Add(retryafter.MaxDelayValue+q.Precision)), "ResetAt %v is further out than MaxDelayValue", q.ResetAt)
			}
			assert.GreaterOrEqual(t, q.Reset, time.Duration(0))
			assert.LessOrEqual(t, q.Reset, retryafter.MaxDelayValue)
			assert.GreaterOrEqual(t, q.Limit, retryafter.Unknown)
			assert.GreaterOrEqual(t, q.Remaining, retryafter.Unknown)
			assert.GreaterOrEqual(t, q.Precision, time.Duration(0))
			assert.LessOrEqual(t, q.Precision, time.Second)
			assert.Equal(t, q.Precision == 0, q.ResetAt.IsZero(), "a reset has both an instant and a precision, or neither")
		}
	})
}
