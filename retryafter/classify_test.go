package retryafter_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/retryafter"
)

func TestThrottled(t *testing.T) {
	tests := []struct {
		name       string
		giveStatus int
		giveH      http.Header
		want       bool
	}{
		{name: "429", giveStatus: 429, want: true},
		{name: "429 with Retry-After", giveStatus: 429, giveH: header("Retry-After", "30"), want: true},
		{name: "529 Anthropic overloaded", giveStatus: 529, want: true},
		{name: "503 with Retry-After", giveStatus: 503, giveH: header("Retry-After", "120"), want: true},
		{name: "503 with retry-after-ms", giveStatus: 503, giveH: header("retry-after-ms", "120"), want: true},
		{name: "503 with a date", giveStatus: 503, giveH: header("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT"), want: true},
		{name: "plain 503 is an outage", giveStatus: 503, want: false},
		{name: "503 with bad Retry-After", giveStatus: 503, giveH: header("Retry-After", "-1"), want: false},
		{name: "503 with quota at 0", giveStatus: 503, giveH: header("X-RateLimit-Remaining", "0"), want: false},
		{name: "plain 403 is authorization", giveStatus: 403, want: false},
		{name: "403 GitHub primary", giveStatus: 403, giveH: header("x-ratelimit-remaining", "0", "x-ratelimit-reset", "1372700873"), want: true},
		{name: "403 GitHub secondary", giveStatus: 403, giveH: header("retry-after", "60"), want: true},
		{name: "403 with IETF r=0", giveStatus: 403, giveH: header("RateLimit", `"default";r=0;t=5`), want: true},
		{name: "403 with remaining", giveStatus: 403, giveH: header("x-ratelimit-remaining", "12", "x-ratelimit-reset", "1372700873"), want: false},
		{name: "403 with malformed remaining", giveStatus: 403, giveH: header("x-ratelimit-remaining", "zero"), want: false},
		{name: "403 cached with remaining 0", giveStatus: 403, giveH: header("Age", "5", "x-ratelimit-remaining", "0"), want: false},
		{name: "200 with remaining 0", giveStatus: 200, giveH: header("x-ratelimit-remaining", "0"), want: false},
		{name: "500 with Retry-After", giveStatus: 500, giveH: header("Retry-After", "5"), want: false},
		{name: "400 AWS throttling is not read", giveStatus: 400, giveH: header("x-amzn-ErrorType", "ThrottlingException"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.giveStatus, Header: tt.giveH}
			assert.Equal(t, tt.want, retryafter.Throttled(resp))
		})
	}
}

func TestThrottledNil(t *testing.T) {
	assert.False(t, retryafter.Throttled(nil))
}
