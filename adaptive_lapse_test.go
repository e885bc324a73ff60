package egress_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// TestAdaptiveStatedRateLapses: one answer states an absurd quota (1 a
// year, clamped to 1 a minute: the max hold), and every answer after it
// is a plain 200. A stated limit beats guessing while it is stated; once
// nothing has restated it for the max hold, the rate is learned again
// from the answers. Before, the cubic probe climbed from the stated rate,
// at the floor of 1/s: 1.0/s for 3 minutes, 4.3/s after 5, against a
// ceiling of 100/s.
func TestAdaptiveStatedRateLapses(t *testing.T) {
	tests := []struct {
		name    string
		giveHdr http.Header
	}{
		{"X-RateLimit-*, 1 a year, 0 left", http.Header{"X-Ratelimit-Limit": {"1"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"31536000"}}},
		{"IETF, 1 a year", http.Header{"Ratelimit-Policy": {`"q";q=1;w=31536000`}, "Ratelimit": {`"q";r=1;t=31536000`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				learned, err := throttle.NewAdaptive(throttle.PerSecond(100))
				require.NoError(t, err)
				base := &firstSaysSpent{hdr: tt.giveHdr}
				client := &http.Client{Transport: egress.NewTransport(base,
					egress.WithLimiter(learned), egress.WithRetry(retryafter.Policy{}))}
				end := time.Now().Add(150 * time.Second)
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for time.Now().Before(end) {
							resp, err := client.Get("http://api.test/")
							if le := (*throttle.LimitError)(nil); errors.As(err, &le) {
								time.Sleep(le.RetryAfter) // held past the max wait: come back then
								continue
							}
							if !assert.NoError(t, err) {
								return
							}
							assert.NoError(t, resp.Body.Close())
						}
					})
				}
				wg.Wait()
				assert.GreaterOrEqual(t, learned.Rate("api.test"), 50.0,
					"the learned rate 150 s after the one statement, 90 s after its max hold")
			})
		})
	}
}
