package egress_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
)

// With WithRetry alone, an upstream that states IETF RateLimit
// "default";r=R;t=T with no RateLimit-Policy (no limit, no window) is
// paced by what it states: at most 1% of the requests meet a 429. Before
// the record inferred the limit from what an admitted request left, 28%
// did (170 of 600 at 48/s). A window of a second whose t is rounded up
// met about one 429 a window (8-22 of 600, 164 before that fix): its
// resets cannot tell it from a bucket that refills, and the first new
// window's "47 left", within a second of the old reset, marked it as
// refilling before its reset. Now the refill such a bucket would need is
// checked (throttle/noreturn.go): the one 429 that shows it falling short
// is left (1 of 600, 1.01-1.02× the minimum).
// The same check keeps a leaky bucket stating X-RateLimit delays from
// being sent its whole limit at each reset (its row).
func TestRetryOnlyIETFWithoutPolicy(t *testing.T) {
	tests := []struct {
		name        string
		give        *simUpstream
		workers     int
		wantRefused int // at most
	}{
		{name: "fixed 48/s, t cut down", give: &simUpstream{algo: "fixed", limit: 48, window: time.Second, offset: 300 * time.Millisecond, dialect: "ietf-nopolicy"}, workers: 32, wantRefused: 6},
		{name: "fixed 48/s, t rounded up", give: &simUpstream{algo: "fixed", limit: 48, window: time.Second, offset: 300 * time.Millisecond, dialect: "ietf-nopolicy", ceilSec: true}, workers: 32, wantRefused: 6},
		{name: "fixed 20 per 10s, t cut down", give: &simUpstream{algo: "fixed", limit: 20, window: 10 * time.Second, offset: 300 * time.Millisecond, dialect: "ietf-nopolicy"}, workers: 4, wantRefused: 6},
		{name: "fixed 20 per 10s, t rounded up", give: &simUpstream{algo: "fixed", limit: 20, window: 10 * time.Second, offset: 300 * time.Millisecond, dialect: "ietf-nopolicy", ceilSec: true}, workers: 4, wantRefused: 6},
		// A leaky bucket of 40 leaking 2/s, stating X-RateLimit with the
		// time until one more request fits as its reset, rounded up:
		// "R left, reset 1" claims far more refill than it has, so the
		// record takes it for a window that returns at its reset, where
		// one request goes alone and its answer says how little came
		// back. Sent the whole limit there, 60 met 429s and 227 of 300
		// requests failed; before the refill check, 32 met 429s.
		{name: "leaky 40 leaking 2/s, X-RateLimit next unit rounded up", give: &simUpstream{algo: "leaky", limit: 40, window: 20 * time.Second, dialect: "x-delta", ceilSec: true}, workers: 32, wantRefused: 3},
	}
	const total = 600
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := tt.give
				base := &simBase{h: up, in: spread(time.Millisecond, 2*time.Millisecond), out: spread(time.Millisecond, 3*time.Millisecond)}
				tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))
				wall, failed := runJob(tr, tt.workers, total)
				admitted, refused := up.stats()
				minimum := time.Duration(float64(total)/float64(up.limit)) * up.window
				t.Logf("wall %v (%.2f× %v), admitted %d, refused %d, failed %d", wall, float64(wall)/float64(minimum), minimum, admitted, refused, failed)
				assert.Zero(t, failed, "failed requests")
				assert.LessOrEqual(t, refused, tt.wantRefused, "429s")
			})
		})
	}
}
