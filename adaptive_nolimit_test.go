package egress_test

import (
	"io"
	"net/http"
	"strings"
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

// firstSaysSpent answers 200 to every request, with hdr on the first
// answer only, and notes when each request was sent.
type firstSaysSpent struct {
	hdr  http.Header
	mu   sync.Mutex
	sent []time.Time
}

func (b *firstSaysSpent) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	h := http.Header{}
	if len(b.sent) == 0 {
		h = b.hdr.Clone()
	}
	b.sent = append(b.sent, time.Now())
	b.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// TestAdaptiveHoldsAQuotaAtZeroThatStatesNoLimit: "0 left, back in 3 s"
// with no limit stated gives the adaptive limiter no rate to follow, but
// says nothing more before the reset, as it does to WithRetry alone and
// to a fleet (redislimit's Adaptive). The Transport leaves a quota at 0
// to the Adaptive, which held only quotas that state a limit: the next
// request left 50 ms later.
func TestAdaptiveHoldsAQuotaAtZeroThatStatesNoLimit(t *testing.T) {
	tests := []struct {
		name    string
		giveHdr http.Header
	}{
		{"X-RateLimit-*", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"3"}}},
		{"IETF draft-03", http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"3"}}},
		{"IETF RateLimit, no policy", http.Header{"Ratelimit": {`"default";r=0;t=3`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				learned, err := throttle.NewAdaptive(throttle.PerSecond(100))
				require.NoError(t, err)
				base := &firstSaysSpent{hdr: tt.giveHdr}
				client := &http.Client{Transport: egress.NewTransport(base,
					egress.WithLimiter(learned), egress.WithRetry(retryafter.Policy{}))}
				for range 2 {
					resp, err := client.Get("http://api.test/")
					require.NoError(t, err)
					require.NoError(t, resp.Body.Close())
				}
				require.Len(t, base.sent, 2)
				assert.GreaterOrEqual(t, base.sent[1].Sub(base.sent[0]), 3*time.Second,
					"the second request waits for the reset")
			})
		})
	}
}
