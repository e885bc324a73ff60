package throttle_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestAllKeepsTheRecordsSlots books a bucket and a record of what the
// upstream states together, from callers racing each other: the record
// says nothing is left for 20 s, then 10 per 20 s, so the callers' slots
// are 20, 22, 24 and 26 s, whatever order they book in. A caller booked
// on the record between another's record and bucket parts met a bucket
// already booked later, moved later, and its first record slot, given
// back while not the latest, stayed unused: 22, 24, 26 and 28 s (a
// hostile upstream's hold then ran 2 s past MaxPause, once in a few
// hundred runs of TestAcceptanceHostileUpstream). The race is rare, so
// the test books many times.
func TestAllKeepsTheRecordsSlots(t *testing.T) {
	const callers, runs = 4, 3000
	want := []time.Duration{20 * time.Second, 22 * time.Second, 24 * time.Second, 26 * time.Second}
	stated := throttle.Statement{Name: "x-ratelimit", Unit: throttle.UnitRequests, Limit: 10, Remaining: 0, Reset: 20 * time.Second, Absolute: true, Precision: time.Second}
	for range runs {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			u, err := throttle.NewUpstream()
			require.NoError(t, err)
			b, err := throttle.NewTokenBucket(throttle.PerSecond(20), 5)
			require.NoError(t, err)
			l := throttle.All(b, u)
			require.NoError(t, u.Learn(ctx, "k", throttle.Outcome{N: 1, Statements: []throttle.Statement{stated}}))
			var mu sync.Mutex
			var got []time.Duration
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					r, err := l.Reserve(ctx, "k", 1, -1)
					if !assert.NoError(t, err) || !assert.True(t, r.OK) {
						return
					}
					mu.Lock()
					got = append(got, r.Delay)
					mu.Unlock()
				})
			}
			wg.Wait()
			slices.Sort(got)
			require.Equal(t, want, got)
		})
	}
}
