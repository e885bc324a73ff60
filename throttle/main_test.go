package throttle_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/egress-go/egress/throttle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// epoch returns where every manual clock starts: a Monday, 00:00 UTC.
func epoch() time.Time { return time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) }

// manualClock is a clock that moves only when told to. It is safe for
// concurrent use.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newManualClock() *manualClock { return &manualClock{t: epoch()} }

// clockedUpstream returns a record on a manual clock, and the clock.
func clockedUpstream(t *testing.T) (*manualClock, *throttle.Upstream) {
	t.Helper()
	clk := newManualClock()
	u, err := throttle.NewUpstream(throttle.WithClock(clk.Now))
	require.NoError(t, err)
	return clk, u
}

// Now returns the clock's time.
func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t, which may lie in the past.
func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Since returns how long the clock has run since epoch.
func (c *manualClock) Since() time.Duration { return c.Now().Sub(epoch()) }

// saturatedRun drives l with more demand than it admits: workers callers
// each reserve one unit of key "k" with no bound on the wait, and ask
// again a little after their slot (or after the refusal's Delay) on clk.
// It returns the slots of the first units admitted, as offsets from
// epoch, in the order they were booked.
func saturatedRun(t *testing.T, l throttle.Limiter, clk *manualClock, workers, units int, jitter time.Duration) []time.Duration {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	next := make([]time.Duration, workers) // when each worker asks next
	slots := make([]time.Duration, 0, units)
	for len(slots) < units {
		w := 0
		for i := range next {
			if next[i] < next[w] {
				w = i
			}
		}
		clk.Set(epoch().Add(next[w]))
		r, err := l.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		if !r.OK {
			require.Positive(t, r.Delay, "a refusal must say when to come back")
			next[w] += r.Delay
			continue
		}
		require.GreaterOrEqual(t, r.Delay, time.Duration(0))
		slot := next[w] + r.Delay
		slots = append(slots, slot)
		next[w] = slot + time.Duration(rng.Int64N(int64(jitter)+1))
	}
	return slots
}

// maxInWindow returns the most slots that fall in any closed interval
// [a, a+span].
func maxInWindow(slots []time.Duration, span time.Duration) int {
	sorted := slices.Clone(slots)
	slices.Sort(sorted)
	most, j := 0, 0
	for i := range sorted {
		for j < len(sorted) && sorted[j] <= sorted[i]+span {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// assertLongRunRate checks that slots, once sorted, are spread at want's
// rate within 0.1%.
func assertLongRunRate(t *testing.T, want throttle.Rate, slots []time.Duration) {
	t.Helper()
	sorted := slices.Clone(slots)
	slices.Sort(sorted)
	span := sorted[len(sorted)-1] - sorted[0]
	require.Positive(t, span)
	got := float64(len(sorted)-1) / span.Seconds()
	wantPerSecond := float64(want.N) / want.Per.Seconds()
	assert.InEpsilon(t, wantPerSecond, got, 0.001, "long-run rate")
}
