package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/llmupstream"
	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A settle made through one process's Transport reaches the budget in
// Redis: another process, on its own redis client, sees the units that
// max_tokens overbooked come back.
func TestSettleThroughTransportReachesRedis(t *testing.T) {
	addr := startRedis(t)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}))
	defer api.Close()
	// Limits per hour, so that what refills while the test runs is a unit
	// at most.
	perHour := []int{100, 100_000, 1000}

	// newProcess builds what one process of the job holds: its redis
	// client, redislimit Client, and the three buckets.
	newProcess := func() (*redislimit.Composite, *redislimit.TokenBucket, *redislimit.Client) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		client, err := redislimit.NewClient(rdb, redislimit.WithTimeout(5*time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		var parts []redislimit.Part
		var output *redislimit.TokenBucket
		for _, n := range perHour {
			tb, err := redislimit.NewTokenBucket(rdb, throttle.Rate{N: n, Per: time.Hour}, n, redislimit.WithClient(client))
			require.NoError(t, err)
			parts, output = append(parts, tb), tb
		}
		all, err := redislimit.All(parts...)
		require.NoError(t, err)
		return all, output, client
	}
	limiter, _, client := newProcess()
	_, otherOutput, _ := newProcess()

	hc := &http.Client{Transport: egress.NewTransport(http.DefaultTransport,
		egress.WithLimiter(limiter), egress.WithEstimate(estimate))}
	defer hc.CloseIdleConnections()
	body, err := json.Marshal(llmupstream.Request{PromptTokens: 10, MaxTokens: 1000})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, api.URL, bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	ctx := context.Background()
	key := req.URL.Host
	before, err := otherOutput.Inspect(ctx, key)
	require.NoError(t, err)
	assert.LessOrEqual(t, before.Remaining, 1, "max_tokens is booked in the shared budget")

	require.NoError(t, egress.Settle(resp, 1, 10, 300))
	require.NoError(t, client.Flush(ctx)) // else it rides on the next call, or goes within SettleDelay
	after, err := otherOutput.Inspect(ctx, key)
	require.NoError(t, err)
	assert.InDelta(t, before.Remaining+700, after.Remaining, 1, "the other process sees the 700 tokens max_tokens overbooked")

	require.NoError(t, egress.Settle(resp, 1, 10, 100), "a second settle does nothing")
	require.NoError(t, client.Flush(ctx))
	again, err := otherOutput.Inspect(ctx, key)
	require.NoError(t, err)
	assert.InDelta(t, after.Remaining, again.Remaining, 1)
}

// startRedis starts a redis-server of the test's own on a free port,
// without persistence, and stops it when the test ends. It skips the
// test when redis-server is missing, except in CI.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is required in CI: %v", err)
		}
		t.Skip("redis-server not found on PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--loglevel", "warning")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for i := 0; rdb.Ping(context.Background()).Err() != nil; i++ {
		if i == 250 {
			t.Fatalf("redis-server on %s did not answer PING", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The server that answers is this test's, not another that took the
	// port meanwhile.
	got, err := rdb.ConfigGet(context.Background(), "dir").Result()
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(dir) // redis-server reports the real path
	require.NoError(t, err)
	require.Equal(t, want, got["dir"], "redis-server on %s is not the one this test started", addr)
	return addr
}
