package throttle_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestContentionNeverOverAdmits is the one real-time test: 1000
// goroutines hammer one key, and the limiter must not admit more than
// rate·T + burst, T running from before the first call to after the
// last. x/time/rate, which reads the clock before taking its lock,
// admits several times that here (golang/go#71360). Only the upper bound
// is checked, so a slow machine cannot make it fail.
func TestContentionNeverOverAdmits(t *testing.T) {
	const (
		goroutines = 1000
		perSecond  = 200_000
		burst      = 1000
	)
	run := 2 * time.Second
	if testing.Short() {
		run = 300 * time.Millisecond
	}
	tests := []struct {
		name    string
		giveTry func(l throttle.Limiter) bool
	}{
		{name: "Allow", giveTry: func(l throttle.Limiter) bool {
			ok, err := throttle.Allow(context.Background(), l, "k", 1)
			return err == nil && ok
		}},
		{name: "Reserve", giveTry: func(l throttle.Limiter) bool {
			r, err := l.Reserve(context.Background(), "k", 1, 0)
			return err == nil && r.OK
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTokenBucket(t, throttle.PerSecond(perSecond), burst)
			var (
				admitted atomic.Int64
				stop     atomic.Bool
				begin    = make(chan struct{})
				wg       sync.WaitGroup
			)
			for range goroutines {
				wg.Go(func() {
					<-begin
					for !stop.Load() {
						if tt.giveTry(tb) {
							admitted.Add(1)
						}
					}
				})
			}
			start := time.Now()
			close(begin)
			time.Sleep(run)
			stop.Store(true)
			wg.Wait()
			elapsed := time.Since(start)

			allowance := int64(elapsed.Seconds()*perSecond) + burst
			require.Positive(t, admitted.Load())
			assert.LessOrEqual(t, admitted.Load(), allowance, "admitted in %v", elapsed)
			t.Logf("admitted %d of an allowance of %d in %v", admitted.Load(), allowance, elapsed)
		})
	}
}
