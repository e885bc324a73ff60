package middleware_test

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

// startRedis starts a redis-server of the test's own on a free port
// (7200-7299), stopped when the test ends, and returns a client of it.
// The test is skipped when redis-server is not installed.
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	for port := 7200; port < 7300; port++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
		t.Cleanup(func() { rdb.Close() })
		for range 100 {
			if rdb.Ping(t.Context()).Err() == nil {
				return rdb
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("redis-server on port %d did not answer", port)
	}
	t.Fatal("no free port in 7200-7299")
	return nil
}

// TestSlotLeaseHeadersAreTrue: behind a redislimit token bucket with
// WithSlotLease, a client that sends at once the r more requests that
// the RateLimit field states is never refused, as the package doc
// promises. (The lease's Remaining counted the units held for slots
// ahead: told r=9, 8 of 9 were refused.) Timing-insensitive: units held
// only become due as time passes.
func TestSlotLeaseHeadersAreTrue(t *testing.T) {
	rdb := startRedis(t)
	l, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(10), 30, redislimit.WithSlotLease(time.Second))
	require.NoError(t, err)
	defer l.Close()
	h := middleware.New(l).Wrap(okHandler)
	stated, refused := 0, 0
	for range 15 {
		resp := get(h, "203.0.113.7:1")
		if resp.StatusCode == 200 {
			qs := retryafter.ParseQuota(resp.Header, time.Now())
			require.Len(t, qs, 1)
			stated += qs[0].Remaining
			for range qs[0].Remaining {
				if resp := get(h, "203.0.113.7:1"); resp.StatusCode != 200 {
					refused++
				}
			}
		}
		time.Sleep(150 * time.Millisecond)
	}
	assert.Zero(t, refused, fmt.Sprintf("of %d requests the headers stated left", stated))
}
