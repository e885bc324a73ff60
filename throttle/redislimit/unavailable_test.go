package redislimit

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestUnavailableSaysItsCauseOnce: with nothing listening at Redis's
// address, go-redis dials until the Client's timeout and ends with the
// context's error; the Client's error says so once ("redis unavailable:
// context deadline exceeded: context deadline exceeded" before).
func TestUnavailableSaysItsCauseOnce(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(freePort(t)), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	tb, err := NewTokenBucket(rdb, throttle.PerSecond(5), 5)
	require.NoError(t, err)
	closeAll(t, tb)
	_, err = tb.Reserve(context.Background(), "k", 1, 0)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.LessOrEqual(t, strings.Count(err.Error(), context.DeadlineExceeded.Error()), 1, "said once: %v", err)
}
