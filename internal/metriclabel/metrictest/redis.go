package metrictest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartRedis starts a redis-server of the test's own on a unix socket in
// a temporary directory, stops it when the test ends, and returns the
// options to reach it. It skips the test when redis-server is missing,
// except in CI.
func StartRedis(t testing.TB) *redis.Options {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is required in CI: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command("redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	opts := &redis.Options{Network: "unix", Addr: sock}
	c := redis.NewClient(opts)
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return opts
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer on %s: %v", sock, err)
		}
	}
}

// Counting is a go-redis hook that counts round trips as the adapters'
// RedisHook should: one per command, one per pipeline.
type Counting struct{ N atomic.Int64 }

// DialHook implements [redis.Hook].
func (c *Counting) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements [redis.Hook].
func (c *Counting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.N.Add(1); return next(ctx, cmd) }
}

// ProcessPipelineHook implements [redis.Hook].
func (c *Counting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.N.Add(1); return next(ctx, cmds) }
}
