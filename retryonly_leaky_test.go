package egress_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
)

// With WithRetry alone, a leaky bucket that states X-RateLimit with, as
// its reset, the time until one more request fits, rounded up to a
// second: "R left, reset 1" says far more refill than it has, so the
// record's refill check (throttle/noreturn.go) takes it for a window that
// returns at its reset. At that reset one request goes alone, and its
// answer says how little came back: no herd meets the bucket. Sent the
// whole limit there, 60 requests met 429s and 227 of 300 failed after
// their retries; before the check, the record took it for a bucket
// refilling its limit per reset and 32 met 429s.
func TestRetryOnlyLeakyBucketStatingItsNextUnit(t *testing.T) {
	tests := []struct {
		name        string
		give        *simUpstream
		wantRefused int // at most
	}{
		{name: "40, leaking 2/s", give: &simUpstream{algo: "leaky", limit: 40, window: 20 * time.Second, dialect: "x-delta", ceilSec: true}, wantRefused: 3},
	}
	const total, workers = 300, 32
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := tt.give
				base := &simBase{h: up, in: spread(time.Millisecond, 2*time.Millisecond), out: spread(time.Millisecond, 3*time.Millisecond)}
				tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))
				wall, failed := runJob(tr, workers, total)
				admitted, refused := up.stats()
				t.Logf("wall %v, admitted %d, refused %d, failed %d", wall, admitted, refused, failed)
				assert.Zero(t, failed, "failed requests")
				assert.LessOrEqual(t, refused, tt.wantRefused, "429s")
			})
		})
	}
}
