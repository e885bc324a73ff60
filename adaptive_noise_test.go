package egress_test

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/retryafter"
)

// 503s unrelated to load (1% of the answers, at random) are not the
// limit: they come at the same share whatever the rate, where a limit's
// throttled answers fall away once the rate falls below it (see
// throttle/adaptive_noise.go). From 5 s on, at least 90% of the hidden
// limit is used, and the learned rate stays within -15% and +10% of it:
// at 1000/s the first second's 503s still leave it some 7% under, where
// the slow probe keeps it (89-95%, 91-92% used). Before the fix, each 503
// at the settled rate cut it by 2%: a hidden 1000/s was used at 29-33%,
// a hidden 100/s at 82%. (At 10/s, where a lone 503 cannot be told from
// the limit, the behaviour is unchanged, and its use, 89-96%, is not
// held here.) Throttled answers (the noise aside) stay near
// 1%: 0-1.51% at 100/s over 37 passes, where a pass in four leaves the
// rate some 7% over the limit, its 429s taken for noise; the bound is
// 3% so that the test does not flake on them.
func TestAcceptanceAdaptiveIgnoresNoise(t *testing.T) {
	tests := []struct {
		name       string
		giveHidden int
		giveSeed   uint64
	}{
		{name: "1000/s", giveHidden: 1000, giveSeed: 1},
		{name: "1000/s, another draw", giveHidden: 1000, giveSeed: 2},
		{name: "100/s", giveHidden: 100, giveSeed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := &hiddenUp{shape: "bucket", limit: constLimit(tt.giveHidden), burst: max(tt.giveHidden/10, 1),
					noise: 0.01, rng: rand.New(rand.NewPCG(tt.giveSeed, 13))}
				r := learnRun(t, learnConfig{up: up, ceiling: 10000, workers: 32, latency: time.Millisecond,
					run: 20 * time.Second, settle: 5 * time.Second, hidden: constLimit(tt.giveHidden), policy: retryafter.Policy{}})
				hidden := float64(tt.giveHidden)
				t.Logf("from 5 s: rate in [%.1f, %.1f], %.3f used, %.4f throttled (%d of %d)", r.lo, r.hi, r.util, r.thr, r.refuse, r.admitted+r.refuse)
				assert.GreaterOrEqual(t, r.lo, 0.85*hidden, "learned rate too low")
				assert.LessOrEqual(t, r.hi, 1.1*hidden, "learned rate too high")
				assert.GreaterOrEqual(t, r.util, 0.9, "utilization")
				assert.LessOrEqual(t, r.thr, 0.03, "throttled answers, noise aside")
			})
		})
	}
}
