package egress_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// A quota that refills continuously (OpenAI's, Anthropic's: the reset is
// when the bucket is full again) at 0 has a unit again after one unit's
// refill, reset ÷ limit, not at the full reset: the README's adaptive
// recipe held the key (and shifted everything booked) for a minute on
// OpenAI's "60 a 6m0s, 0 left", where a unit comes back every 6 s.
func TestAdaptiveRefillingQuotaAtZeroHoldsOneUnit(t *testing.T) {
	for _, tt := range []struct {
		name string
		hdr  func(now time.Time) []string
	}{
		{"OpenAI 60 per 6m0s", func(time.Time) []string {
			return []string{"x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "6m0s"}
		}},
		{"Anthropic 10, full in 40 s", func(now time.Time) []string {
			return []string{"Date", now.UTC().Format(http.TimeFormat), "anthropic-ratelimit-requests-limit", "10", "anthropic-ratelimit-requests-remaining", "0",
				"anthropic-ratelimit-requests-reset", now.Add(40 * time.Second).UTC().Format(time.RFC3339)}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
					if n == 0 {
						return respond(req, http.StatusOK, tt.hdr(time.Now())...), nil
					}
					return respond(req, http.StatusOK), nil
				}}
				a, err := throttle.NewAdaptive(throttle.PerSecond(100))
				require.NoError(t, err)
				tr := egress.NewTransport(base, egress.WithLimiter(a), egress.WithRetry(retryafter.Policy{}), egress.WithMaxWait(-1))
				for range 2 {
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
					require.NoError(t, err)
					drainClose(t, resp)
				}
				sent := base.times()
				require.Len(t, sent, 2)
				t.Logf("gap %v", sent[1].Sub(sent[0]))
				assert.LessOrEqual(t, sent[1].Sub(sent[0]), 10*time.Second, "held to the full refill")
			})
		})
	}
}
