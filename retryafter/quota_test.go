package retryafter_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/retryafter"
)

const unknown = retryafter.Unknown

type parseQuotaTest struct {
	name    string
	giveH   http.Header
	giveNow time.Time
	want    []retryafter.Quota
}

func parseQuotaTests() []parseQuotaTest {
	return []parseQuotaTest{
		{name: "none", giveH: header("Content-Type", "text/plain")},
		{name: "nil", giveH: nil},
		{
			name: "OpenAI requests and tokens",
			giveH: header("x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
				"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
			want: []retryafter.Quota{
				{Name: "requests", Limit: 60, Remaining: 59, Reset: time.Second, Refills: true},
				{Name: "tokens", Limit: 150000, Remaining: 149984, Reset: 6 * time.Minute, Refills: true},
			},
		},
		{
			name: "OpenAI usage-based tokens",
			giveH: header("x-ratelimit-limit-tokens_usage_based", "160000",
				"x-ratelimit-remaining-tokens_usage_based", "0", "x-ratelimit-reset-tokens_usage_based", "9ms"),
			want: []retryafter.Quota{{Name: "tokens_usage_based", Limit: 160000, Remaining: 0, Reset: 9 * time.Millisecond, Refills: true}},
		},
		{
			name: "IETF policies joined by id",
			giveH: header("RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`,
				"RateLimit", `"daily";r=0;t=3600, "burst";r=50;t=30`),
			want: []retryafter.Quota{
				{Name: "daily", Limit: 1000, Remaining: 0, Reset: time.Hour, Window: 24 * time.Hour},
				{Name: "burst", Limit: 100, Remaining: 50, Reset: 30 * time.Second, Window: time.Minute},
			},
		},
		{
			name:  "IETF policy without a RateLimit item",
			giveH: header("RateLimit-Policy", `"burst";q=100;w=60, "daily";l=1000`, "RateLimit", `"burst";r=1`),
			want: []retryafter.Quota{
				{Name: "burst", Limit: 100, Remaining: 1, Window: time.Minute},
				{Name: "daily", Limit: 1000, Remaining: unknown},
			},
		},
		{
			name:  "IETF malformed policy field ignored",
			giveH: header("RateLimit-Policy", `"burst";q=`, "RateLimit", `"burst";r=1;t=2`),
			want:  []retryafter.Quota{{Name: "burst", Limit: unknown, Remaining: 1, Reset: 2 * time.Second}},
		},
		{
			name:  "IETF negative q skipped",
			giveH: header("RateLimit-Policy", `"burst";q=-1;w=60, "daily";q=5`),
			want:  []retryafter.Quota{{Name: "daily", Limit: 5, Remaining: unknown}},
		},
		{
			name:  "draft-03",
			giveH: header("RateLimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "9", "RateLimit-Reset", "7"),
			want:  []retryafter.Quota{{Name: "ratelimit", Limit: 10, Remaining: 9, Reset: 7 * time.Second}},
		},
		{
			name: "GitHub, from Date",
			giveH: header("Date", serverDate, "x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999",
				"x-ratelimit-used", "1", "x-ratelimit-reset", "1372700873", "x-ratelimit-resource", "core"),
			giveNow: serverNow.Add(5 * time.Minute),
			want:    []retryafter.Quota{{Name: "core", Limit: 5000, Remaining: 4999, Reset: 20*time.Minute + 47*time.Second, Absolute: true}},
		},
		{
			name:    "Discord bucket",
			giveH:   header("X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1470173023", "X-RateLimit-Reset-After", "1", "X-RateLimit-Bucket", "abcd1234"),
			giveNow: time.Unix(1470173022, 0),
			want:    []retryafter.Quota{{Name: "abcd1234", Limit: 5, Remaining: 0, Reset: time.Second}},
		},
		{
			name:    "X",
			giveH:   header("x-rate-limit-limit", "900", "x-rate-limit-remaining", "899", "x-rate-limit-reset", "1372700873"),
			giveNow: serverNow,
			want:    []retryafter.Quota{{Name: "x-rate-limit", Limit: 900, Remaining: 899, Reset: 20*time.Minute + 47*time.Second, Absolute: true}},
		},
		{
			name: "Anthropic, four quotas",
			giveH: header("Date", serverDate,
				"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", "2013-07-01T17:27:07Z",
				"anthropic-ratelimit-tokens-limit", "90000", "anthropic-ratelimit-tokens-remaining", "89000", "anthropic-ratelimit-tokens-reset", "2013-07-01T17:27:08Z",
				"anthropic-ratelimit-input-tokens-limit", "80000", "anthropic-ratelimit-input-tokens-remaining", "79500", "anthropic-ratelimit-input-tokens-reset", "2013-07-01T17:27:09Z",
				"anthropic-ratelimit-output-tokens-limit", "10000", "anthropic-ratelimit-output-tokens-remaining", "0", "anthropic-ratelimit-output-tokens-reset", "2013-07-01T17:27:10Z"),
			giveNow: serverNow,
			want: []retryafter.Quota{
				{Name: "requests", Limit: 50, Remaining: 49, Reset: time.Second, Absolute: true, Refills: true},
				{Name: "tokens", Limit: 90000, Remaining: 89000, Reset: 2 * time.Second, Absolute: true, Refills: true},
				{Name: "input-tokens", Limit: 80000, Remaining: 79500, Reset: 3 * time.Second, Absolute: true, Refills: true},
				{Name: "output-tokens", Limit: 10000, Remaining: 0, Reset: 4 * time.Second, Absolute: true, Refills: true},
			},
		},
		{
			// A leaky bucket of 40 draining in 20 s is a token bucket of 40
			// refilling 40 per 20 s: full again once the 32 used have
			// drained, in 16 s.
			name:  "Shopify",
			giveH: header("X-Shopify-Shop-Api-Call-Limit", "32/40"),
			want:  []retryafter.Quota{{Name: "shopify", Limit: 40, Remaining: 8, Reset: 16 * time.Second, Refills: true}},
		},
		{
			name:  "Shopify full, and over",
			giveH: header("X-Shopify-Shop-Api-Call-Limit", "42/40"),
			want:  []retryafter.Quota{{Name: "shopify", Limit: 40, Remaining: 0, Reset: 21 * time.Second, Refills: true}},
		},
		{
			name:  "Shopify empty",
			giveH: header("X-Shopify-Shop-Api-Call-Limit", "0/40"),
			want:  []retryafter.Quota{{Name: "shopify", Limit: 40, Remaining: 40, Refills: true}},
		},
		{
			name:  "partial: remaining only",
			giveH: header("X-RateLimit-Remaining", "-3"),
			want:  []retryafter.Quota{{Name: "x-ratelimit", Limit: unknown, Remaining: 0}},
		},
		{
			name:  "huge counts saturate",
			giveH: header("X-RateLimit-Limit", "99999999999999999999999", "X-RateLimit-Remaining", "99999999999999999999999"),
			want:  []retryafter.Quota{{Name: "x-ratelimit", Limit: int(^uint(0) >> 1), Remaining: int(^uint(0) >> 1)}},
		},
		{
			name:  "several families, in order",
			giveH: header("X-Shopify-Shop-Api-Call-Limit", "1/40", "RateLimit", `"default";r=3`, "x-ratelimit-remaining-requests", "2"),
			want: []retryafter.Quota{
				{Name: "default", Limit: unknown, Remaining: 3},
				{Name: "requests", Limit: unknown, Remaining: 2, Refills: true},
				{Name: "shopify", Limit: 40, Remaining: 39, Reset: 500 * time.Millisecond, Refills: true},
			},
		},
		{
			// egress's middleware over a token bucket of 48/s and burst 9
			// with WithXRateLimit: one limit, stated twice. The older
			// fields' limit is the burst, which read as a second quota of
			// 9 per window.
			name: "X-RateLimit restating an IETF policy is left out",
			giveH: header("RateLimit", `"bucket";r=8;t=1`, "RateLimit-Policy", `"bucket";q=47;w=1`,
				"X-RateLimit-Limit", "9", "X-RateLimit-Remaining", "8", "X-RateLimit-Reset", "1"),
			want: []retryafter.Quota{{Name: "bucket", Limit: 47, Remaining: 8, Reset: time.Second, Window: time.Second}},
		},
		{
			name: "X-Rate-Limit restating one of two IETF policies is left out",
			giveH: header("RateLimit", `"second";r=8;t=1, "day";r=900;t=3600`,
				"X-Rate-Limit-Limit", "1000", "X-Rate-Limit-Remaining", "900", "X-Rate-Limit-Reset", "3600"),
			want: []retryafter.Quota{
				{Name: "second", Limit: unknown, Remaining: 8, Reset: time.Second},
				{Name: "day", Limit: unknown, Remaining: 900, Reset: time.Hour},
			},
		},
		{
			name:  "X-RateLimit stating another remaining is another limit, and stays",
			giveH: header("RateLimit", `"bucket";r=8;t=1`, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Reset", "60"),
			want: []retryafter.Quota{
				{Name: "bucket", Limit: unknown, Remaining: 8, Reset: time.Second},
				{Name: "x-ratelimit", Limit: 5000, Remaining: 4999, Reset: time.Minute},
			},
		},
		{
			name:  "keys spelled twice: canonical first, then in sorted order",
			giveH: http.Header{"x-ratelimit-resource": {"search"}, "x-RateLimit-Resource": {"graphql"}, "x-ratelimit-remaining": {"1"}},
			want:  []retryafter.Quota{{Name: "graphql", Limit: unknown, Remaining: 1}},
		},
		{
			name:  "keys spelled twice, one canonical",
			giveH: http.Header{"x-ratelimit-resource": {"search"}, "X-Ratelimit-Resource": {"core"}, "X-Ratelimit-Remaining": {"1"}},
			want:  []retryafter.Quota{{Name: "core", Limit: unknown, Remaining: 1}},
		},
		{
			name:  "cached response",
			giveH: header("Age", "3", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1s"),
		},
	}
}

func TestParseQuota(t *testing.T) {
	for _, tt := range parseQuotaTests() {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, withoutResetAt(retryafter.ParseQuota(tt.giveH, tt.giveNow)))
		})
	}
}

// withoutResetAt returns qs with ResetAt and Precision cleared, which
// TestParseQuotaResetAt checks.
func withoutResetAt(qs []retryafter.Quota) []retryafter.Quota {
	for i := range qs {
		qs[i].ResetAt, qs[i].Precision = time.Time{}, 0
	}
	return qs
}

func TestParseQuotaResetAt(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return tm
	}
	tests := []struct {
		name          string
		giveH         http.Header
		giveNow       time.Time
		wantResetAt   time.Time
		wantPrecision time.Duration
	}{
		{
			name:          "an epoch to the second is rounded up by a second",
			giveH:         header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1372700873"),
			giveNow:       serverNow,
			wantResetAt:   at("2013-07-01T17:47:54Z"),
			wantPrecision: time.Second,
		},
		{
			name: "a Date truncated to the second does not move it: the skew is below what it can show",
			giveH: header("Date", serverDate, "X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", "Mon, 01 Jul 2013 17:27:08 GMT"),
			giveNow:       serverNow.Add(900 * time.Millisecond),
			wantResetAt:   at("2013-07-01T17:27:09Z"),
			wantPrecision: time.Second,
		},
		{
			name: "a client 10 s ahead: the largest skew Date allows moves it, so it is never early",
			giveH: header("Date", serverDate, "X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", "Mon, 01 Jul 2013 17:27:08 GMT"),
			giveNow:       serverNow.Add(10 * time.Second),
			wantResetAt:   at("2013-07-01T17:27:19Z"),
			wantPrecision: time.Second,
		},
		{
			name:          "a client 5 s behind",
			giveH:         header("Date", serverDate, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1372699630"),
			giveNow:       serverNow.Add(-5 * time.Second),
			wantResetAt:   at("2013-07-01T17:27:06Z"),
			wantPrecision: time.Second,
		},
		{
			name:          "a fractional epoch is as precise as its digits",
			giveH:         header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1372699630.125"),
			giveNow:       serverNow,
			wantResetAt:   at("2013-07-01T17:27:10.126Z"),
			wantPrecision: time.Millisecond,
		},
		{
			name:          "a delay counts from now, unrounded",
			giveH:         header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "3"),
			giveNow:       serverNow,
			wantResetAt:   serverNow.Add(3 * time.Second),
			wantPrecision: time.Second,
		},
		{
			name:          "a Go duration in milliseconds",
			giveH:         header("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "120ms"),
			giveNow:       serverNow,
			wantResetAt:   serverNow.Add(120 * time.Millisecond),
			wantPrecision: time.Millisecond,
		},
		{
			name:          "RFC 3339 with a fraction",
			giveH:         header("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2013-07-01T17:27:10.5Z"),
			giveNow:       serverNow,
			wantResetAt:   at("2013-07-01T17:27:10.6Z"),
			wantPrecision: 100 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			qs := retryafter.ParseQuota(tt.giveH, tt.giveNow)
			require.Len(t, qs, 1)
			assert.True(t, tt.wantResetAt.Equal(qs[0].ResetAt), "ResetAt %v, want %v", qs[0].ResetAt, tt.wantResetAt)
			assert.Equal(t, tt.wantPrecision, qs[0].Precision)
		})
	}
}

// sethvargo/go-limiter sends X-RateLimit-Reset as an HTTP-date.
func TestParseQuotaHTTPDateReset(t *testing.T) {
	got := retryafter.ParseQuota(header("Date", serverDate, "X-RateLimit-Limit", "48", "X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "Mon, 01 Jul 2013 17:27:08 GMT"), serverNow)
	assert.Equal(t, []retryafter.Quota{{Name: "x-ratelimit", Limit: 48, Remaining: 0, Reset: 2 * time.Second, Absolute: true}}, withoutResetAt(got))
	got = retryafter.ParseQuota(header("Date", serverDate, "X-RateLimit-Limit", "48", "X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "Mon, 01 Jul 2013 17:27:08 UTC"), serverNow)
	assert.Equal(t, []retryafter.Quota{{Name: "x-ratelimit", Limit: 48, Remaining: 0, Reset: 2 * time.Second, Absolute: true}}, withoutResetAt(got), "time.RFC1123 in UTC")
}
