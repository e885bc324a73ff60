package throttle_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// learningWindow is a window that learns its key's limit.
type learningWindow interface {
	throttle.Limiter
	throttle.Learner
	throttle.Pauser
	throttle.Inspector
}

// windows builds each window at limit per window.
var windows = []struct {
	name string
	make func(t *testing.T, limit int, window time.Duration) learningWindow
}{
	{"sliding window", func(t *testing.T, limit int, window time.Duration) learningWindow {
		w, err := throttle.NewSlidingWindow(limit, window)
		require.NoError(t, err)
		return w
	}},
	{"fixed window", func(t *testing.T, limit int, window time.Duration) learningWindow {
		w, err := throttle.NewFixedWindow(limit, window)
		require.NoError(t, err)
		return w
	}},
}

// A window configured above the upstream's limit learns, from the
// refusals, a limit the upstream admits, and keeps it: the README's
// recipe 25% too high against an upstream that answers a bare 429
// (recipe_upstreams_test.go). The upstream is a window of the same
// kind, and each refusal pauses the key for a second (sendThrough).
// Before the windows learned, each window of the upstream refused again
// (a refusal in every one of the 10 windows).
func TestWindowLearnsLimitFromRefusals(t *testing.T) {
	for _, w := range windows {
		t.Run(w.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client, upstream := w.make(t, 125, 5*time.Second), w.make(t, 100, 5*time.Second)
				refused, admitted := sendThrough(t, client, upstream.(throttle.Allower), 50*time.Second)
				assert.LessOrEqual(t, refused, 2)
				assert.GreaterOrEqual(t, admitted, 900) // 10 windows of 100, one of them cut short
			})
		})
	}
}

// A refusal of the first units of a window that the key booked nothing
// else in says the upstream's window is not where the key thinks, not
// that its limit is lower: the key keeps its limit. A refusal within a
// full window lowers it to what was admitted there.
func TestWindowLearnsOnlyWhatItsWindowShows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fw, err := throttle.NewFixedWindow(100, time.Second)
		require.NoError(t, err)
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) // a window's start
		for range 100 {
			ok, err := fw.AllowN(ctx, "k", 1)
			require.NoError(t, err)
			require.True(t, ok)
		}
		time.Sleep(time.Second) // the next window
		for range 5 {
			ok, err := fw.AllowN(ctx, "k", 1)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, fw.Learn(ctx, "k", throttle.Outcome{N: 1, Throttled: true}))
		}
		s, err := fw.Inspect(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 95, s.Remaining, "the limit stays 100")

		time.Sleep(time.Second) // a window full of the key's units: 90 admitted, then refusals
		for range 100 {
			ok, err := fw.AllowN(ctx, "k", 1)
			require.NoError(t, err)
			require.True(t, ok)
		}
		for i := range 100 {
			require.NoError(t, fw.Learn(ctx, "k", throttle.Outcome{N: 1, Throttled: i >= 90}))
		}
		time.Sleep(time.Second)
		s, err = fw.Inspect(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, 90, s.Remaining, "the limit learned")
	})
}

// An upstream that refuses everything takes a window's limit down by at
// most 30% a refusal and never below one unit; a minute after the last
// refusal the configured limit is back. A refusal that states a quota is
// the record's to follow, and a refusal of nothing booked (N 0) or an
// attempt that got no answer teaches nothing.
func TestWindowLearnedLimitBounds(t *testing.T) {
	for _, w := range windows {
		t.Run(w.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				l := w.make(t, 100, time.Second)
				remaining := func() int {
					time.Sleep(2 * time.Second) // the window empties
					s, err := l.Inspect(ctx, "k")
					require.NoError(t, err)
					return s.Remaining
				}
				for _, o := range []throttle.Outcome{
					{N: 1, Throttled: true, Statements: []throttle.Statement{{Limit: 100, Remaining: 0, Reset: time.Second}}},
					{N: 0, Throttled: true},
					{N: 1, Throttled: true, Failed: true},
					{N: 1},
				} {
					require.NoError(t, l.Learn(ctx, "k", o))
				}
				require.Equal(t, 100, remaining(), "nothing learned")

				refuse := func() {
					ok, err := l.(throttle.Allower).AllowN(ctx, "k", 1)
					require.NoError(t, err)
					require.True(t, ok)
					require.NoError(t, l.Learn(ctx, "k", throttle.Outcome{N: 1, Throttled: true}))
				}
				refuse()
				assert.Equal(t, 70, remaining(), "one refusal: at most 30% off")
				for range 50 {
					refuse()
					time.Sleep(2 * time.Second)
				}
				assert.Equal(t, 1, remaining(), "the floor: one unit a window")
				r, err := l.Reserve(ctx, "k", 1, -1)
				require.NoError(t, err)
				assert.True(t, r.OK)

				time.Sleep(time.Minute)
				assert.Equal(t, 100, remaining(), "forgotten")
			})
		})
	}
}
