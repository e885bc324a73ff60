package throttle

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLogStateReusesItsArray checks the log's array handling against a
// plain slice: the same runs after every push and drop, memory bounded
// by the most runs ever held, and no allocation once a busy key's log
// has settled.
func TestLogStateReusesItsArray(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		s       logState
		model   []logRun
		at, cum int64
		most    int
	)
	for i := range 100_000 {
		if rng.IntN(2) == 0 || len(model) == 0 {
			at, cum = at+1, cum+1
			s.push(logRun{at: at, cum: cum})
			model = append(model, logRun{at: at, cum: cum})
		} else {
			n := rng.IntN(min(len(model), 3) + 1)
			s.dropFront(n)
			model = model[n:]
		}
		most = max(most, len(model))
		require.Equal(t, len(model), len(s.runs()), "step %d", i)
		if len(model) > 0 {
			require.Equal(t, model[0], s.runs()[0], "step %d", i)
			require.Equal(t, model[len(model)-1], s.runs()[len(model)-1], "step %d", i)
		}
		require.LessOrEqual(t, cap(s.buf), 4*most+8, "step %d", i)
	}

	// A log sliding at a steady length: one run in, one run out.
	s = logState{}
	for i := range 64 {
		s.push(logRun{at: int64(i), cum: int64(i + 1)})
	}
	next := int64(64)
	allocs := testing.AllocsPerRun(1000, func() {
		s.push(logRun{at: next, cum: next + 1})
		s.dropFront(1)
		next++
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 64, len(s.runs()))
	assert.Equal(t, next, s.total())
}
