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
		for _, q := range retryafter.ParseQuota(parseRawHeader(raw), time.Unix(0, nowNanos)) {
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
