package egress_test

import (
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/retryafter"
)

// An epoch reset is read as an instant on any clock, testing/synctest's
// (2000-01-01, where epochs are below 1e9) included: "now + 10 s" as a
// Unix time is 10 s away, not a delay of thirty years clamped to
// MaxPause.
func TestAcceptanceEpochResetOnSynctestClock(t *testing.T) {
	tests := []struct {
		name       string
		giveHeader []string // the reset is appended, as now+10s in Unix seconds
		giveReset  string
		wantName   string
	}{
		{name: "X-RateLimit", giveHeader: []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0"}, giveReset: "X-RateLimit-Reset", wantName: "x-ratelimit"},
		{name: "GitHub", giveHeader: []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Used", "10", "X-RateLimit-Resource", "core"}, giveReset: "X-RateLimit-Reset", wantName: "core"},
		{name: "X (Twitter)", giveHeader: []string{"X-Rate-Limit-Limit", "10", "X-Rate-Limit-Remaining", "0"}, giveReset: "X-Rate-Limit-Reset", wantName: "x-rate-limit"},
		{name: "draft-03 RateLimit-Reset as an epoch", giveHeader: []string{"RateLimit-Limit", "10", "RateLimit-Remaining", "0"}, giveReset: "RateLimit-Reset", wantName: "ratelimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				h := http.Header{}
				for i := 0; i+1 < len(tt.giveHeader); i += 2 {
					h.Set(tt.giveHeader[i], tt.giveHeader[i+1])
				}
				h.Set(tt.giveReset, strconv.FormatInt(now.Add(10*time.Second).Unix(), 10))
				qs := retryafter.ParseQuota(h, now)
				require.Len(t, qs, 1)
				assert.Equal(t, tt.wantName, qs[0].Name)
				assert.Equal(t, 10*time.Second, qs[0].Reset)
				assert.True(t, qs[0].Absolute, "an epoch is an instant")
				d, ok := retryafter.Parse(h, now)
				assert.True(t, ok)
				assert.Equal(t, 10*time.Second, d, "remaining 0: wait for the reset")
			})
		})
	}
}
