package egress_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

// A token bucket that states the time until it is full as an epoch
// second (the middleware with ResetEpoch) is not a window of its burst
// per second, though its resets are a second apart: an answer in order
// says more is left than any window could have (throttle/bucketlike.go),
// and the record stops pacing it at its burst per second. Measured, the
// README recipe in 10 runs of each: 1.02–1.03× to 4 goroutines, 1.19–1.28×
// to 32, and configured 25% too high 1.14–1.35×, 0–2 429s; before, to 32
// goroutines, 2.16–2.26×, every answer saying 9 of 10 were left while
// the record sent 9 a second. Its "0 left" held the key until the
// second it stated, and in about one run in thirty the recipe fell into
// sending the bucket's burst at each second: 2.00×; now the configured
// limiter paces it there too: none in 320 runs at -cpu 2,4, and later 2
// in 160 at -cpu 4 (none in 160 at -cpu 1, nor at -cpu 2), so the fall is
// rarer, not gone. (Measured at most 1.13× otherwise; not yet 1.05×
// everywhere.)
func TestRecipeBucketStatingEpochResets(t *testing.T) {
	const requests = 600
	for _, scale := range []float64{1, 1.25} {
		for _, workers := range []int{4, 32} {
			t.Run(fmt.Sprintf("x%.2f/%d goroutines", scale, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := runRecipe(t, recipeAlgoNamed("token bucket"), recipeDialectNamed("x epoch"), scale, workers, requests, 0, 0)
					t.Log(r)
					assert.Zero(t, r.failed, "failed requests: %v", r)
					assert.LessOrEqual(t, r.tooMany, int64(requests/100), "429s: %v", r)
					assert.LessOrEqual(t, r.wall.Seconds()/r.minimum.Seconds(), 1.45, "wall ÷ minimum: %v", r)
				})
			})
		}
	}
}
