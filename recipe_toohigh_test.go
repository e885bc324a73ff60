package egress_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

// The README's recipe configured 25% above a bucket's published rate
// (issue 13): the bucket learns from the 429s that its rate is too high
// (throttle/learnrate.go), and stays below what the upstream admits. The
// goals: at most 1% of requests see a 429, and the job takes at most
// 1.10× the run at the published numbers. Measured: 2–3 429s, 1.05–1.09×;
// before, 13 429s and 1.26× (token bucket), 29 429s and 1.81× (leaky
// bucket, whose middleware states no quota in any dialect). A sliding
// log or an aligned fixed window configured 25% above a limit the
// upstream states only by refusing learns its limit the same way
// (throttle/learnlimit.go): to 4 goroutines 1 429 and 1.00×; before, 9–10
// 429s. To 32 goroutines the windows are not held to the goal: the first
// window's burst is sent before any refusal comes back, and the 25 units
// over the limit may all be refused (under -race, the sliding log met 25
// 429s and 1.20× in one run of three, the fixed window 7; 1–3 and 1.00×
// in 30 runs without it; before learning, 35–57 and up to 1.80×, 2
// requests failed).
func TestRecipeTooHighLearnsTheRate(t *testing.T) {
	const (
		requests    = 600
		wantTooMany = requests / 100 // 1%
		wantRatio   = 1.10
	)
	tests := []struct {
		giveAlgo, giveDialect string
		giveWorkers           []int // nil: 4 and 32
	}{
		{giveAlgo: "token bucket", giveDialect: "429 only"},
		{giveAlgo: "leaky bucket", giveDialect: "ietf"},
		{giveAlgo: "leaky bucket", giveDialect: "429 only"},
		{giveAlgo: "sliding log", giveDialect: "429 only", giveWorkers: []int{4}},
		{giveAlgo: "fixed window aligned", giveDialect: "429 only", giveWorkers: []int{4}},
	}
	for _, tt := range tests {
		workerCounts := tt.giveWorkers
		if workerCounts == nil {
			workerCounts = []int{4, 32}
		}
		for _, workers := range workerCounts {
			t.Run(fmt.Sprintf("%s/%s/%d goroutines", tt.giveAlgo, tt.giveDialect, workers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					algo, dialect := recipeAlgoNamed(tt.giveAlgo), recipeDialectNamed(tt.giveDialect)
					published := runRecipe(t, algo, dialect, 1, workers, requests, 0, 0)
					high := runRecipe(t, algo, dialect, 1.25, workers, requests, 0, 0)
					t.Logf("published: %v\n25%% too high: %v", published, high)
					assert.Zero(t, high.failed, "failed requests: %v", high)
					assert.LessOrEqual(t, high.tooMany, int64(wantTooMany), "429s: %v", high)
					assert.LessOrEqual(t, high.wall.Seconds()/published.wall.Seconds(), wantRatio, "wall ÷ the published run's: %v", high)
				})
			})
		}
	}
}

// recipeAlgoNamed returns the recipe's algorithm of that name.
func recipeAlgoNamed(name string) recipeAlgo {
	for _, a := range recipeAlgos {
		if a.name == name {
			return a
		}
	}
	panic("no algorithm " + name)
}

// recipeDialectNamed returns the recipe's dialect of that name.
func recipeDialectNamed(name string) recipeDialect {
	for _, d := range recipeDialects {
		if d.name == name {
			return d
		}
	}
	panic("no dialect " + name)
}
