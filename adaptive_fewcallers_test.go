package egress_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/retryafter"
)

// Where the callers' round trips, not the limiter, set the pace (8
// callers, 45-50 ms each way: at most 80-89/s against a hidden 100/s
// bucket of burst 1), a throttled answer measures what was sent, and the
// learned rate falls near it: from 5 s on it stays under twice the
// hidden limit, and at most 1% of the answers are throttled. Before the
// fix, the first second's cuts left the rate at twice the limit and more
// (12 times it with burst 10), where nudges of 2% took it down slowly,
// and the callers' bunching drew 2-7% throttled answers.
func TestAcceptanceAdaptiveFewCallers(t *testing.T) {
	tests := []struct {
		name      string
		giveWay   time.Duration
		giveBurst int
	}{
		{name: "50 ms each way, burst 1", giveWay: 50 * time.Millisecond, giveBurst: 1},
		{name: "45 ms each way, burst 1", giveWay: 45 * time.Millisecond, giveBurst: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const hidden = 100
				up := &hiddenUp{shape: "bucket", limit: constLimit(hidden), burst: tt.giveBurst}
				r := learnRun(t, learnConfig{up: up, ceiling: 10000, workers: 8, latency: tt.giveWay,
					run: 20 * time.Second, settle: 5 * time.Second, hidden: constLimit(hidden), policy: retryafter.Policy{},
					stagger: 100 * time.Microsecond})
				t.Logf("from 5 s: rate in [%.1f, %.1f], %.3f used, %.4f throttled (%d of %d)", r.lo, r.hi, r.util, r.thr, r.refuse, r.admitted+r.refuse)
				assert.LessOrEqual(t, r.hi, 2.0*hidden, "learned rate far above what is sent")
				assert.LessOrEqual(t, r.thr, 0.01, "throttled answers")
				assert.Zero(t, r.failed, "failed requests")
			})
		})
	}
}
