package egress_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
)

// With WithRetry alone, nothing but the record of what the upstream
// states paces the key. Against a bucket that states its size and what
// remains but no rate, and its reset rounded up to a second
// (throttled/throttled's GCRA), and against a window of a second stated
// the same way, the first herd of callers meets 429s (nothing was known
// yet), and after that the record keeps to what is stated: nothing
// fails, at most one more refusal (the probe that tells a window from a
// bucket), and most of what the upstream allows is used.
func TestAcceptanceRetryOnlyVagueResets(t *testing.T) {
	tests := []struct {
		name     string
		give     *simUpstream
		wantUsed float64 // at least this share of what the upstream allows over the run
	}{
		{name: "GCRA 48/s burst 9, delay to full rounded up", give: &simUpstream{algo: "bucket", limit: 9, window: 9 * time.Second / 48, dialect: "x-delta", ceilSec: true}, wantUsed: 0.8},
		{name: "fixed 1 s window, delay to its end rounded up", give: &simUpstream{algo: "fixed", limit: 20, window: time.Second, offset: 300 * time.Millisecond, dialect: "x-delta", ceilSec: true}, wantUsed: 0.8},
	}
	const workers = 32
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := tt.give
				base := &simBase{h: up, in: spread(time.Millisecond), out: spread(time.Millisecond)}
				tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))
				run := 10 * time.Second
				failed, first := drive(tr, workers, run)
				admitted, refused := up.stats()
				allowed := float64(up.limit) * float64(run) / float64(up.window)
				t.Logf("admitted %d of %.0f (%.2f), refused %d, failed %d", admitted, allowed, float64(admitted)/allowed, refused, failed)
				assert.Zero(t, failed, "requests failed: %v", first)
				assert.LessOrEqual(t, refused, workers-up.limit+1, "refusals beyond the first herd's and the probe's")
				assert.GreaterOrEqual(t, float64(admitted)/allowed, tt.wantUsed, "share of the quota used")
			})
		})
	}
}
