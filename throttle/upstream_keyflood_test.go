package throttle_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestUpstreamKeyFloodIsCheap: once every key the record tracks holds
// live state (here a pause, as a 429 to each of many API keys through a
// Transport with WithRetry alone leaves), each new key was refused only
// after a sweep of every key under the record's one mutex: 20–40 ms at
// the default 100 000 keys, during which no request on any key could
// book. As in the limiters' engine (issue 11, item 10), a full record
// sweeps at most once a second or per maxKeys/8 keys added, and refuses
// in O(1) between sweeps; keys that turned fresh still make room.
func TestUpstreamKeyFloodIsCheap(t *testing.T) {
	const maxKeys = throttle.DefaultMaxKeys
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	u, err := throttle.NewUpstream(throttle.WithMaxKeys(maxKeys), throttle.WithClock(clock))
	require.NoError(t, err)
	ctx := context.Background()
	for i := range maxKeys {
		require.NoError(t, u.Pause(ctx, "live-"+strconv.Itoa(i), time.Minute))
	}

	// A flood of new keys: each is refused, and cheaply. Unfixed, each
	// refusal swept 100 000 keys (1.5–40 ms, more under -race):
	// the loop stops at the budget rather than run for minutes.
	const floods = 5000
	budget := 3 * time.Second
	start := time.Now()
	refused := 0
	for i := range floods {
		_, err := u.Reserve(ctx, "new-"+strconv.Itoa(i), 1, time.Minute)
		require.ErrorIs(t, err, throttle.ErrTooManyKeys)
		refused++
		if time.Since(start) > budget {
			break
		}
	}
	t.Logf("%d refusals in %v", refused, time.Since(start))
	assert.Equal(t, floods, refused, "%d new keys refused in %v: each refusal swept every key", refused, time.Since(start))

	// A key already tracked is served meanwhile.
	r, err := u.Reserve(ctx, "live-1", 1, 2*time.Minute)
	require.NoError(t, err)
	require.NoError(t, r.Cancel(ctx))

	// Once the pauses are over, the keys are fresh, and new keys get in
	// (WithMaxKeys drops fresh keys losslessly).
	advance(2 * time.Minute)
	r, err = u.Reserve(ctx, "after", 1, time.Minute)
	require.NoError(t, err)
	assert.True(t, r.OK)
}
