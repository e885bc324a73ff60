package redislimit

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// redisError is an error reply, as go-redis builds one.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give error
		want bool
	}{
		{redisError("READONLY You can't write against a read only replica."), true},
		{redisError("LOADING Redis is loading the dataset in memory"), true},
		{redisError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{redisError("CLUSTERDOWN The cluster is down"), true},
		{redisError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{redisError("BUSY Redis is busy running a script."), true},
		{redisError("NOREPLICAS Not enough good replicas to write."), true},
		{redisError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), true},
		{redisError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{redisError("ERR redislimit: unknown op x"), false},
		{redisError("MOVED 3999 127.0.0.1:6381"), false},
		{redisError("ASK 3999 127.0.0.1:6381"), false},
		{redisError("NOSCRIPT No matching script."), false},
		{errors.New("READONLY but not a reply"), false},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{nil, false},
	}
	for _, tt := range tests {
		name := "nil"
		if tt.give != nil {
			name = tt.give.Error()
		}
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, unavailable(tt.give))
		})
	}
}

// TestReadOnlyRedis turns the limiter's Redis into a replica of another,
// as a failover does to the old master: every script then fails with
// READONLY, which counts as Redis being unavailable, so the breaker, the
// observer and the failure policy engage. Promoted back, it serves again.
func TestReadOnlyRedis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		givePolicy FailurePolicy
		wantOK     bool
	}{
		{"fail closed", FailClosed, false},
		{"fail open", FailOpen, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			master := startRedis(t)
			s := startRedis(t)
			rdb := s.client(t)
			ctx := context.Background()
			var o observed
			l, err := NewTokenBucket(rdb, throttle.PerSecond(10), 10, WithFailurePolicy(tt.givePolicy), WithObserver(o.observe),
				WithTimeout(time.Minute)) // only READONLY may fail a call
			require.NoError(t, err)
			closeAll(t, l)
			r := reserve(t, l, "k", 1, 0)
			require.True(t, r.OK)

			require.NoError(t, rdb.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(master.port)).Err())
			require.Eventually(t, func() bool {
				role, err := rdb.Do(ctx, "ROLE").Slice()
				return err == nil && role[0] == "slave"
			}, 5*time.Second, 10*time.Millisecond)

			r, err = l.Reserve(ctx, "k", 1, 0)
			if tt.wantOK {
				require.NoError(t, err)
				assert.True(t, r.OK)
			} else {
				require.ErrorIs(t, err, ErrUnavailable)
				var ue *UnavailableError
				require.ErrorAs(t, err, &ue)
				assert.Contains(t, ue.Err.Error(), "READONLY")
			}
			failures, _ := o.counts()
			assert.Equal(t, 1, failures)

			require.NoError(t, rdb.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
			require.Eventually(t, func() bool {
				_, err := l.Reserve(ctx, "k", 1, 0)
				_, recoveries := o.counts()
				return err == nil && recoveries == 1
			}, 5*time.Second, 10*time.Millisecond, "a probe finds Redis serving again")
			failures, _ = o.counts()
			assert.Equal(t, 1, failures, "the breaker turned the calls between away")
		})
	}
}
