package redislimit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// server is a redis-server the tests own: started on a free port,
// without persistence, and killed and restarted at will.
type server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	// exited is closed once cmd has exited.
	exited chan struct{}
}

// needRedis skips the test when redis-server is missing, except in CI.
func needRedis(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is required in CI: %v", err)
		}
		t.Skip("redis-server not found on PATH: install Redis to run the redislimit tests")
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis starts a redis-server with extra arguments and stops it when
// the test ends.
func startRedis(t testing.TB, extra ...string) *server {
	t.Helper()
	needRedis(t)
	s := &server{t: t, port: freePort(t), dir: t.TempDir(), args: extra}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *server) start() {
	s.t.Helper()
	for attempt := 0; ; attempt++ {
		if s.try() {
			return
		}
		if attempt == 5 {
			s.t.Fatalf("redis-server did not start on a free port")
		}
		s.port = freePort(s.t) // another process took it meanwhile
	}
}

// try starts redis-server on s.port and reports whether the server that
// answers there is this one: it has this test's directory.
func (s *server) try() bool {
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "log")}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	require.NoError(s.t, s.cmd.Start())
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	s.exited = exited
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			s.cmd = nil
			return false
		default:
		}
		dir, err := c.ConfigGet(context.Background(), "dir").Result()
		if err == nil {
			if dir["dir"] == s.dir {
				return true
			}
			s.kill()
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("redis-server on %s did not start", s.addr())
	return false
}

// kill stops the server at once, as a crash would.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// stall makes the server answer no command for d, from the moment stall
// returns: CLIENT PAUSE holds every client's commands, where a DEBUG SLEEP
// sent from another goroutine may not have begun yet (telling it by a
// ping that times out in 20 ms took a busy machine's slow ping for the
// sleep).
func (s *server) stall(t testing.TB, d time.Duration) {
	t.Helper()
	require.NoError(t, s.client(t).Do(context.Background(), "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err())
}

// client returns a client for the server, closed when the test ends.
func (s *server) client(t testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// startCluster starts three cluster nodes and joins them into one
// cluster with no replicas.
func startCluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rdb, _ := startClusterNodes(t)
	return rdb
}

// startClusterNodes starts a three-node cluster, each node given extra
// arguments, and returns a client and the nodes, for a test to kill one.
func startClusterNodes(t testing.TB, extra ...string) (*redis.ClusterClient, []*server) {
	t.Helper()
	needRedis(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-cli is required in CI: %v", err)
		}
		t.Skip("redis-cli not found on PATH: install Redis to run the cluster tests")
	}
	var addrs []string
	var nodes []*server
	for range 3 {
		s := startRedis(t, append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}, extra...)...)
		addrs = append(addrs, s.addr())
		nodes = append(nodes, s)
	}
	out, err := exec.Command("redis-cli", append([]string{"--cluster", "create"}, append(addrs, "--cluster-replicas", "0", "--cluster-yes")...)...).CombinedOutput()
	require.NoError(t, err, string(out))
	deadline := time.Now().Add(15 * time.Second)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("cluster did not become ready: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	// Wait until the client sees every slot.
	for time.Now().Before(deadline) {
		if err := rdb.ForEachShard(context.Background(), func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return rdb, nodes
}

func (s *server) String() string { return fmt.Sprintf("redis-server on %s", s.addr()) }
