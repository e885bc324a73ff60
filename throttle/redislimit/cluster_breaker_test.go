package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestClusterBreakerPerNode: on a Redis Cluster that serves what it can
// (cluster-require-full-coverage no), a dead node turns away the keys of
// its own slots, and not those of the nodes that answer.
func TestClusterBreakerPerNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	rdb, nodes := startClusterNodes(t, "--cluster-require-full-coverage", "no")
	ctx := context.Background()
	c := newClock(time.Hour) // frozen: an open breaker lets no probe through
	l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, c.option())
	require.NoError(t, err)
	closeAll(t, l)

	// One key on the node to kill, one elsewhere.
	dead := nodes[0].addr()
	var onDead, onLive string
	for i := 0; onDead == "" || onLive == ""; i++ {
		key := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		ks, err := l.keys(key)
		require.NoError(t, err)
		m, err := rdb.MasterForKey(ctx, ks[0])
		require.NoError(t, err)
		if m.Options().Addr == dead {
			onDead = key
		} else {
			onLive = key
		}
	}
	for _, key := range []string{onDead, onLive} {
		require.True(t, reserve(t, l, key, 1, 0).OK, key)
	}

	nodes[0].kill()
	_, err = l.Reserve(ctx, onDead, 1, 0)
	require.ErrorIs(t, err, ErrUnavailable, "the dead node's key")
	tests := []struct {
		giveKey string
		wantErr error
	}{
		{giveKey: onDead, wantErr: ErrUnavailable},
		{giveKey: onLive, wantErr: nil},
	}
	for _, tt := range tests {
		r, err := l.Reserve(ctx, tt.giveKey, 1, 0)
		assert.ErrorIs(t, err, tt.wantErr, tt.giveKey)
		if tt.wantErr == nil {
			assert.True(t, r.OK, tt.giveKey)
		}
	}
	assert.False(t, l.Available(), "a node is away")
}
