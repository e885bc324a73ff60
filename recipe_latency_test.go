package egress_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// The README recipe against upstreams that answer after a millisecond
// each way, as a loopback or LAN upstream does, rather than at once: the
// buckets' rows meet the goals as they do at zero latency. The windows'
// do not yet: a herd's first answer states a remaining that counts
// requests of the herd still on their way, and the record takes them off
// it again (bench/FOLLOW.md, 2026-12-07 14:45).
func TestRecipeWithLatency(t *testing.T) {
	const requests = 600
	tests := []struct{ giveAlgo, giveDialect string }{
		{giveAlgo: "token bucket", giveDialect: "x delta"},
		{giveAlgo: "token bucket", giveDialect: "ietf"},
		{giveAlgo: "leaky bucket", giveDialect: "ietf"},
		{giveAlgo: "leaky bucket", giveDialect: "x epoch"},
		{giveAlgo: "leaky bucket", giveDialect: "x delta"},
	}
	for _, tt := range tests {
		for _, workers := range []int{4, 32} {
			t.Run(fmt.Sprintf("%s/%s/%d goroutines", tt.giveAlgo, tt.giveDialect, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := runRecipe(t, recipeAlgoNamed(tt.giveAlgo), recipeDialectNamed(tt.giveDialect), 1, workers, requests, 0, time.Millisecond)
					t.Log(r)
					assert.Zero(t, r.failed, "failed requests: %v", r)
					assert.LessOrEqual(t, r.tooMany, int64(requests*5/1000), "429s: %v", r)
					assert.LessOrEqual(t, r.wall.Seconds()/r.minimum.Seconds(), 1.05, "wall ÷ minimum: %v", r)
				})
			})
		}
	}
}
