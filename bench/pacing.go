package main

import (
	"context"
	"fmt"

	"github.com/egress-go/egress/internal/upstream"
)

// pacingRuns is how many times the sustained-pacing run repeats.
const pacingRuns = 3

// pacingScenario is issue 4's sustained pacing: a server that enforces
// 100/s with a burst of 10, and egress at that limit with DefaultTolerance.
func pacingScenario(smoke bool) scenario {
	n := 1500
	if smoke {
		n = 100
	}
	return scenario{
		id: "P", title: fmt.Sprintf("Sustained pacing: 100 req/s, burst 10, %d requests from 16 goroutines", n),
		limit:  upstream.Config{Rate: 100, Burst: 10},
		shares: []int{n}, goroutines: 16,
		contenders: []string{"egress"},
	}
}

// runPacing runs the pacing scenario pacingRuns times.
func (h *harness) runPacing(ctx context.Context) ([]row, error) {
	sc := pacingScenario(h.smoke)
	var rows []row
	for i := range pacingRuns {
		r, err := h.runOnce(ctx, sc, "egress")
		if err != nil {
			return nil, err
		}
		if r.skipped != "" {
			h.note("pacing: %s", r.skipped)
			return nil, nil
		}
		r.contender = fmt.Sprintf("egress, run %d", i+1)
		fmt.Printf("   %s: goodput %.4f of the rate, 429s %d\n", r.contender, utilization(sc, r), r.refused)
		rows = append(rows, r)
	}
	return rows, nil
}
