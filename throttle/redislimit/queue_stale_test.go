package redislimit

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/queue"
)

// A Redis that comes back with data older than the last grants (a
// restart from a snapshot, or a failover to a replica that missed the
// last writes) still has the queue's meta hash, so it grants at once: the
// holders still running must claim their permits back at their next
// renewal, or the fleet holds more than maxInFlight. Before, a held id
// gone from a warm queue stayed gone, and another process took its
// permit: 4 in flight with maxInFlight 2.
func TestQueueStaleRestoreKeepsBound(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	holders := newTestQueue(t, srv.client(t), c, 2, 4)
	other := newTestQueue(t, srv.client(t), c, 2, 4)
	warm(c)
	require.NoError(t, srv.client(t).Save(context.Background()).Err()) // the snapshot: warm, nobody holds
	r1, err := holders.Acquire(context.Background())
	require.NoError(t, err)
	r2, err := holders.Acquire(context.Background())
	require.NoError(t, err)
	srv.kill()
	srv.start() // loads the snapshot, which lacks both permits

	c.advance(testLease / 4)
	require.Eventually(t, func() bool { // the first call after the restart may find a dead connection
		_, err := holders.FleetStats(context.Background())
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	holders.renew(context.Background())
	release, ok := other.TryAcquire()
	if ok {
		release()
	}
	assert.False(t, ok, "a permit held across the restore was handed out again")
	assert.Equal(t, queue.Stats{InFlight: 2}, fleet(t, other))
	r1()
	r2()
	assert.Equal(t, queue.Stats{}, fleet(t, other))
}

// A renewal that reaches Redis after one of its permits was released
// (it listed the permit before the release) must not claim it back, or
// the fleet loses the permit for a lease: while the queue is new (after
// Redis lost its data), which claimed it back before, and once warm, now
// that a warm queue claims back the held ids it lacks.
func TestQueueRenewalAfterReleaseClaimsNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		giveLoss bool // Redis lost its data before the release
	}{
		{name: "warm"},
		{name: "after data loss", giveLoss: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startRedis(t)
			c := newClock(0)
			rdb := srv.client(t)
			q := newTestQueue(t, rdb, c, 1, 4)
			warm(c)
			release, err := q.Acquire(context.Background())
			require.NoError(t, err)
			if tt.giveLoss {
				require.NoError(t, rdb.FlushAll(context.Background()).Err())
				q.renew(context.Background()) // claimed back, in the lease of grace
			}
			q.mu.Lock()
			held := maps.Clone(q.held)
			q.mu.Unlock()
			release()
			c.advance(testLease / 2)
			q.mu.Lock()
			q.held = held // the list the late renewal was sent with
			q.mu.Unlock()
			q.renew(context.Background())
			q.mu.Lock()
			clear(q.held)
			q.mu.Unlock()
			assert.Equal(t, queue.Stats{}, fleet(t, q), "the released permit was claimed back")
		})
	}
}

// A renewal sent before a waiter left the line, and run after, must not
// put it back in line while the queue is new (after Redis lost its
// data): the place would be granted a permit nobody holds, lost to the
// fleet for a lease.
func TestQueueRenewalAfterLeavingLineRejoinsNothing(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c := newClock(0)
	rdb := srv.client(t)
	q := newTestQueue(t, rdb, c, 1, 4)
	warm(c)
	hold, err := q.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, rdb.FlushAll(context.Background()).Err())
	q.renew(context.Background()) // a lease of grace begins: the permit is claimed back
	ctx, cancel := context.WithCancel(context.Background())
	waiter := acquireAsync(t, ctx, q, 1)
	q.mu.Lock()
	var id string
	for w := range q.waiting {
		id = w
	}
	q.mu.Unlock()
	cancel()
	require.ErrorIs(t, receive(t, waiter).err, context.Canceled)

	c.advance(testLease / 2)
	_, err = q.call(context.Background(), "renew", 0, id) // the late renewal
	require.NoError(t, err)
	hold()
	c.advance(testLease / 2) // warm, and the late renewal's lease runs on
	assert.Equal(t, queue.Stats{}, fleet(t, q), "the place left was put back in line and granted")
}

// An acquire whose reply was lost is given up at once; should Redis run
// it after that release (go-redis resent it, or the release overtook it
// on another connection), it must take nothing: its caller has gone, and
// the permit would be lost to the fleet for a lease.
func TestQueueAcquireAfterItsReleaseTakesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		giveHeld bool // every permit is held: the late acquire would wait in line
	}{
		{name: "free permit"},
		{name: "in line", giveHeld: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock(0)
			q := newTestQueue(t, startRedis(t).client(t), c, 1, 4)
			warm(c)
			want := queue.Stats{}
			if tt.giveHeld {
				release, err := q.Acquire(context.Background())
				require.NoError(t, err)
				t.Cleanup(release)
				want.InFlight = 1
			}
			id := q.newID()
			q.giveUp(id) // the release, run first
			_, err := q.call(context.Background(), "acquire", id, 1, q.m)
			require.NoError(t, err)
			assert.Equal(t, want, fleet(t, q), "the late acquire took a permit or a place")
		})
	}
}
