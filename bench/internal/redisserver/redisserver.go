// Package redisserver starts a private redis-server for the bench on a
// free loopback port, and reads how many commands it ran.
package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrMissing is returned by [Start] when redis-server is not installed.
var ErrMissing = errors.New("redisserver: redis-server not found in PATH")

// Server is a running redis-server that the bench owns.
type Server struct {
	// Addr is host:port.
	Addr string
	cmd  *exec.Cmd
}

// Start runs redis-server on a free port, without persistence, and waits
// until it answers PING.
func Start(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrMissing
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisserver: start: %w", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := rdb.Ping(ctx).Err(); err == nil {
			return s, nil
		} else if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("redisserver: %s did not answer PING: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close stops the server.
func (s *Server) Close() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// ResetStats zeroes the server's command statistics and flushes its data.
func ResetStats(ctx context.Context, rdb *redis.Client) error {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	return rdb.ConfigResetStat(ctx).Err()
}

// Calls returns how many times each command ran since the last
// [ResetStats], by lower-case name, from INFO commandstats. The INFO,
// CONFIG and FLUSHALL commands the bench itself sends are left out, and so
// is each new connection's handshake (HELLO, CLIENT SETINFO).
func Calls(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "info" || name == "flushall" || name == "hello" ||
			strings.HasPrefix(name, "config") || strings.HasPrefix(name, "client") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("redisserver: commandstats %q: %w", sc.Text(), err)
				}
				calls[name] = n
			}
		}
	}
	return calls, sc.Err()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisserver: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
