package throttle

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSettleSaturatedShare runs an LLM batch on a simulated clock: 16
// workers against an output-token bucket of 80 000 per minute (burst
// 80 000), each booking max_tokens 4 000 and using 10-50% of it, the
// response (and its settle) 3s after the slot. It measures the tokens
// really used per minute, in minutes 5 to 30, as a share of the limit:
// with settles the bucket lends what the calls did not use to the next
// ones, without them a third of the budget goes unused.
func TestSettleSaturatedShare(t *testing.T) {
	tests := []struct {
		name       string
		giveSettle bool
		wantMin    float64
		wantMax    float64
	}{
		{name: "estimate only", giveSettle: false, wantMin: 0.25, wantMax: 0.35},
		{name: "settled", giveSettle: true, wantMin: 0.97, wantMax: 1.04}, // a burst may add 1/25 over 25 minutes
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := saturatedShare(t, tt.giveSettle)
			assert.GreaterOrEqual(t, got, tt.wantMin)
			assert.LessOrEqual(t, got, tt.wantMax)
		})
	}
}

func saturatedShare(t *testing.T, settle bool) float64 {
	const (
		limit     = 80_000
		maxTokens = 4_000
		workers   = 16
		latency   = 3 * time.Second
		from, to  = 5 * time.Minute, 30 * time.Minute
	)
	rng := rand.New(rand.NewPCG(1, 2))
	clk := &settleClock{t: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}
	tb, err := NewTokenBucket(PerMinute(limit), limit, WithClock(clk.now))
	require.NoError(t, err)
	start := clk.now()
	type worker struct {
		next   time.Duration // when its response arrives and it books again
		r      *Reservation
		actual int
	}
	ws := make([]worker, workers)
	used := 0
	for {
		i := 0
		for j := range ws {
			if ws[j].next < ws[i].next {
				i = j
			}
		}
		if ws[i].next > to {
			break
		}
		clk.t = start.Add(ws[i].next)
		if ws[i].r != nil && settle {
			require.NoError(t, ws[i].r.Settle(context.Background(), ws[i].actual))
		}
		r, err := tb.Reserve(context.Background(), "k", maxTokens, -1)
		require.NoError(t, err)
		actual := maxTokens/10 + rng.IntN(maxTokens*4/10+1)
		if slot := ws[i].next + r.Delay; slot > from && slot <= to {
			used += actual
		}
		ws[i] = worker{next: ws[i].next + r.Delay + latency, r: r, actual: actual}
	}
	return float64(used) / ((to - from).Minutes() * limit)
}
