package egress_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// A quota at 0 whose reset (an instant, within the record's own max hold)
// lies beyond the retry policy's MaxPause holds the key for at most
// MaxPause: "Statements that would hold a key longer than the retry
// policy's MaxPause are clamped to it" (WithUpstream).
func TestStatementHoldsAtMostMaxPause(t *testing.T) {
	const maxPause = 5 * time.Second
	cases := []struct {
		name string
		hdr  func(now time.Time) []string
	}{
		{"epoch reset 40s ahead", func(now time.Time) []string {
			return []string{"Date", now.UTC().Format(http.TimeFormat), "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", strconv.FormatInt(now.Add(40*time.Second).Unix(), 10)}
		}},
		{"delta reset 40s", func(now time.Time) []string {
			return []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "40"}
		}},
		{"anthropic reset 40s ahead", func(now time.Time) []string {
			return []string{"Date", now.UTC().Format(http.TimeFormat), "anthropic-ratelimit-requests-limit", "10", "anthropic-ratelimit-requests-remaining", "0",
				"anthropic-ratelimit-requests-reset", now.Add(40 * time.Second).UTC().Format(time.RFC3339)}
		}},
	}
	for _, tt := range cases {
		for _, limiter := range []string{"none", "bucket", "adaptive"} {
			t.Run(tt.name+"/limiter="+limiter, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
						if n == 0 {
							return respond(req, http.StatusOK, tt.hdr(time.Now())...), nil
						}
						return respond(req, http.StatusOK), nil
					}}
					opts := []egress.Option{egress.WithRetry(retryafter.Policy{MaxPause: maxPause}), egress.WithMaxWait(-1)}
					switch limiter {
					case "none":
						opts = append(opts, egress.WithUpstream(mustUpstream(t)))
					case "bucket":
						opts = append(opts, egress.WithUpstream(mustUpstream(t)), egress.WithLimiter(mustTokenBucket(t, throttle.PerSecond(100), 10)))
					case "adaptive": // the README's "I do not know the limit", no record
						a, err := throttle.NewAdaptive(throttle.PerSecond(100))
						require.NoError(t, err)
						opts = append(opts, egress.WithLimiter(a))
					}
					tr := egress.NewTransport(base, opts...)
					for range 2 {
						resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
						require.NoError(t, err)
						drainClose(t, resp)
					}
					sent := base.times()
					require.Len(t, sent, 2)
					assert.LessOrEqual(t, sent[1].Sub(sent[0]), maxPause+time.Second, "held longer than MaxPause")
					t.Logf("gap %v", sent[1].Sub(sent[0]))
				})
			})
		}
	}
}
