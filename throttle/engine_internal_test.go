package throttle

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestMaxKeysIsAHardCap adds keys from many goroutines at once: the
// limiter never tracks more than WithMaxKeys of them.
func TestMaxKeysIsAHardCap(t *testing.T) {
	const maxKeys = 8
	tb, err := NewTokenBucket(PerSecond(1), 1, WithMaxKeys(maxKeys), WithClock(func() time.Time { return time.Unix(0, 0) }))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				_, _ = tb.AllowN(context.Background(), strconv.Itoa(g*50+i), 1)
			}
		})
	}
	wg.Wait()
	tb.e.mu.RLock()
	n := len(tb.e.keys)
	tb.e.mu.RUnlock()
	assert.Equal(t, maxKeys, n)
}
