package retryafter_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/retryafter"
)

// Draft-03 (and Envoy's X- prefixed copy): "RateLimit-Limit: expiring-limit
// [, quota-policy]*". The first member is the limit that RateLimit-Remaining
// and RateLimit-Reset describe, the one closest to exhaustion; the members
// with ";w=" describe every policy. Here the minute policy of 50 is the one
// being reported, and the second's 10 is not the limit.
func TestDraft03LimitIsTheExpiringLimit(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, prefix := range []string{"", "X-"} {
		h := header(prefix+"RateLimit-Limit", "50, 10;w=1, 50;w=60",
			prefix+"RateLimit-Remaining", "3", prefix+"RateLimit-Reset", "20")
		qs := retryafter.ParseQuota(h, now)
		require.Len(t, qs, 1, prefix)
		assert.Equal(t, 50, qs[0].Limit, "%sRateLimit-Limit %q", prefix, h.Get(prefix+"RateLimit-Limit"))
		assert.Equal(t, 3, qs[0].Remaining, prefix)
	}
	// Two field lines, each a bare limit, still resolve to the lowest.
	qs := retryafter.ParseQuota(header("X-RateLimit-Limit", "60", "X-RateLimit-Limit", "5000"), now)
	require.Len(t, qs, 1)
	assert.Equal(t, 60, qs[0].Limit)
	// A field holding only policies still gives a limit.
	qs = retryafter.ParseQuota(header("RateLimit-Limit", "100;w=60", "RateLimit-Remaining", "1"), now)
	require.Len(t, qs, 1)
	assert.Equal(t, 100, qs[0].Limit)
}

// The package doc promises that Parse, Pause, Next and Throttled do not
// allocate for a Retry-After; only a malformed date may. RFC 9110 makes a
// recipient accept the RFC 850 and asctime forms, which are valid.
func TestValidHTTPDatesDoNotAllocate(t *testing.T) {
	var p retryafter.Policy
	req := &http.Request{Method: http.MethodGet, Header: http.Header{}}
	for _, v := range []string{
		"Mon, 01 Jul 2013 17:27:36 GMT",  // IMF-fixdate
		"Monday, 01-Jul-13 17:27:36 GMT", // RFC 850
		"Mon Jul  1 17:27:36 2013",       // asctime
	} {
		resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{
			"Date": {serverDate}, "Retry-After": {v},
		}}
		d, ok := retryafter.Parse(resp.Header, serverNow)
		require.True(t, ok, v)
		require.Equal(t, 30*time.Second, d, v)
		assert.Zero(t, testing.AllocsPerRun(100, func() { retryafter.Parse(resp.Header, serverNow) }), "Parse %q", v)
		assert.Zero(t, testing.AllocsPerRun(100, func() { p.Pause(resp, serverNow) }), "Pause %q", v)
		assert.Zero(t, testing.AllocsPerRun(100, func() { p.Next(req, resp, 1, serverNow) }), "Next %q", v)
		resp.StatusCode = http.StatusServiceUnavailable
		assert.Zero(t, testing.AllocsPerRun(100, func() { retryafter.Throttled(resp) }), "Throttled %q", v)
	}
}

// A RateLimit item that states neither r nor t, or a RateLimit-Policy item
// without its required q, describes no quota; ParseQuota "returns nil when
// h describes none".
func TestIETFItemWithoutValuesIsNoQuota(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, h := range []http.Header{
		header("RateLimit", `"default"`),
		header("RateLimit", `"default";pk=:dXNlcjE=:;foo=1`),
		header("RateLimit-Policy", `"default";w=60`),
		header("RateLimit-Policy", `"default";qu="requests"`),
	} {
		assert.Nil(t, retryafter.ParseQuota(h, now), "%v", h)
	}
	// A policy's w is kept when its RateLimit item states r.
	qs0 := retryafter.ParseQuota(header("RateLimit-Policy", `"x";w=60`, "RateLimit", `"x";r=5`), now)
	require.Len(t, qs0, 1)
	assert.Equal(t, retryafter.Quota{Name: "x", Limit: retryafter.Unknown, Remaining: 5, Window: time.Minute}, qs0[0])
	// A stated item next to them is still read.
	qs := retryafter.ParseQuota(header("RateLimit", `"a", "b";r=0;t=3`), now)
	require.Len(t, qs, 1)
	assert.Equal(t, "b", qs[0].Name)
}

// IETF t is "seconds until the quota returns". A server sending it as a
// Decimal (t=1.5) must not make the client come back early: flooring 1.5 to
// 1 retries half a second before the quota is back, and t=0.5 becomes 0,
// which is no signal at all.
func TestIETFDecimalResetNotEarly(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		give string
		min  time.Duration
	}{
		{`"burst";r=0;t=1.5`, 1500 * time.Millisecond},
		{`"burst";r=0;t=0.5`, 500 * time.Millisecond},
	} {
		d, ok := retryafter.Parse(header("RateLimit", tt.give), now)
		assert.True(t, ok, tt.give)
		assert.GreaterOrEqual(t, d, tt.min, tt.give)
		qs := retryafter.ParseQuota(header("RateLimit", tt.give), now)
		require.Len(t, qs, 1)
		assert.GreaterOrEqual(t, qs[0].Reset, tt.min, tt.give)
	}
}

// A negative Decimal t stays malformed when rounded up (ceil(-0.5) is -0).
func TestIETFNegativeDecimalResetMalformed(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	assert.Nil(t, retryafter.ParseQuota(header("RateLimit", `"burst";r=0;t=-0.5`), now))
	_, ok := retryafter.Parse(header("RateLimit", `"burst";r=0;t=-0.5`), now)
	assert.False(t, ok)
}

// Quota.Reset is clamped at MaxDelayValue, "the longest delay this package
// ever reports", but ResetAt was not: an epoch in milliseconds (read as
// seconds, so tens of thousands of years out) or an absurd RFC 3339 year
// gave a ResetAt centuries away, and a batch job that sleeps until ResetAt
// (time.Until saturates at 292 years) never wakes, while Reset says 31 days.
func TestResetAtClampedLikeReset(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, h := range []http.Header{
		header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1796400000000"), // an epoch in ms
		header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999999"),
		header("Anthropic-Ratelimit-Tokens-Remaining", "0", "Anthropic-Ratelimit-Tokens-Reset", "9999-12-31T23:59:59Z"),
		header("Date", "Fri, 04 Dec 2026 11:00:00 GMT", "X-Rate-Limit-Remaining", "0", "X-Rate-Limit-Reset", "99999999999"),
	} {
		qs := retryafter.ParseQuota(h, now)
		require.Len(t, qs, 1, "%v", h)
		q := qs[0]
		assert.Equal(t, retryafter.MaxDelayValue, q.Reset, "%v", h)
		assert.LessOrEqual(t, q.ResetAt.Sub(now), q.Reset+q.Precision, "%v: ResetAt %v", h, q.ResetAt)
	}
}

// Shopify's "used/size": a bucket over full by a large count overflowed
// count × drain, and the wait came out as a few milliseconds (or 0) for a
// bucket that needs its full drain of 20 s.
func TestShopifyOverflow(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	d, ok := retryafter.Parse(header("X-Shopify-Shop-Api-Call-Limit", "2000000000000/1000000000000"), now)
	assert.True(t, ok)
	assert.Equal(t, 20*time.Second, d)
}
