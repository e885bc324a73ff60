package retryafter_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/retryafter"
)

// allocResponses are responses as the Transport sees them on every request:
// header keys in canonical form, as net/http builds them.
func allocResponses() []struct {
	name string
	give *http.Response
} {
	return []struct {
		name string
		give *http.Response
	}{
		{name: "200 ordinary", give: &http.Response{StatusCode: http.StatusOK, Header: http.Header{
			"Content-Type":   {"application/json; charset=utf-8"},
			"Content-Length": {"1234"},
			"Date":           {serverDate},
			"Cache-Control":  {"private, max-age=60"},
			"Etag":           {`"a00049ba79152d03380c34652f2cb612"`},
			"Server":         {"nginx"},
			"Vary":           {"Accept, Accept-Encoding"},
		}}},
		{name: "429 without a delay", give: &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{
			"Content-Type": {"text/plain"},
			"Date":         {serverDate},
		}}},
		{name: "503 without a delay", give: &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{
			"Date": {serverDate},
		}}},
		{name: "429 Retry-After 2", give: &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{
			"Retry-After": {"2"},
		}}},
		{name: "429 Retry-After 2 with Date", give: &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{
			"Content-Type":   {"application/json"},
			"Content-Length": {"87"},
			"Date":           {serverDate},
			"Retry-After":    {"2"},
		}}},
	}
}

// TestAllocs guards the Transport's budget: Pause, Parse, Throttled and Next
// run on every response and must not allocate on ordinary ones.
func TestAllocs(t *testing.T) {
	var p retryafter.Policy
	req := &http.Request{Method: http.MethodGet, Header: http.Header{}}
	for _, tt := range allocResponses() {
		t.Run(tt.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(100, func() { p.Pause(tt.give, serverNow) }), "Pause")
			assert.Zero(t, testing.AllocsPerRun(100, func() { retryafter.Parse(tt.give.Header, serverNow) }), "Parse")
			assert.Zero(t, testing.AllocsPerRun(100, func() { retryafter.Throttled(tt.give) }), "Throttled")
			assert.Zero(t, testing.AllocsPerRun(100, func() { p.Next(req, tt.give, 1, serverNow) }), "Next")
		})
	}
}

// benchmarkResponses adds responses that carry quota fields, which cost a
// little more to read.
func benchmarkResponses() []struct {
	name string
	give *http.Response
} {
	rs := allocResponses()
	more := []struct {
		name   string
		status int
		kv     []string
	}{
		{name: "200 GitHub", status: http.StatusOK, kv: []string{
			"Date", serverDate, "Content-Type", "application/json",
			"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4987",
			"X-RateLimit-Reset", "1372700873", "X-RateLimit-Used", "13", "X-RateLimit-Resource", "core",
		}},
		{name: "403 GitHub exhausted", status: http.StatusForbidden, kv: []string{
			"Date", serverDate, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1372700873",
		}},
		{name: "200 OpenAI", status: http.StatusOK, kv: []string{
			"Date", serverDate,
			"x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
			"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s",
		}},
		{name: "200 IETF", status: http.StatusOK, kv: []string{
			"Date", serverDate, "RateLimit-Policy", `"burst";q=100;w=60`, "RateLimit", `"burst";r=50;t=30`,
		}},
	}
	for _, m := range more {
		rs = append(rs, struct {
			name string
			give *http.Response
		}{name: m.name, give: &http.Response{StatusCode: m.status, Header: header(m.kv...)}})
	}
	return rs
}

// BenchmarkPause measures what the Transport adds to every response.
func BenchmarkPause(b *testing.B) {
	var p retryafter.Policy
	now := serverNow.Add(time.Second)
	for _, bb := range benchmarkResponses() {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Pause(bb.give, now)
			}
		})
	}
}
