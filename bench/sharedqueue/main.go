// Command sharedqueue runs the bench scenario "shared concurrency" of
// issue 16: 4 OS processes × 16 goroutines call an upstream that takes
// 20–50 ms per request, counts its own concurrency and answers 429 above
// 8, each request holding a permit of a queue:
//
//   - shared: redislimit.Queue(8) shared through Redis;
//   - local8: each process with queue.New(8, …) (over the limit);
//   - local2: each process with queue.New(2, …) (under-used);
//   - polling: a redsync-style mutex per permit: each of 8 keys taken
//     with SET NX PX, tried in turn, and when all are taken, tried again
//     after 50–250 ms (redsync v4's default retry delay); released by a
//     compare-and-delete script. Written here after redsync, not the
//     redsync module itself;
//   - single: one process of 64 goroutines with queue.New(8, …), the
//     throughput the shared queue is held to (goal ≥ 0.95×).
//
// With -chaos, the shared queue runs while workers are SIGKILLed at
// random and restarted, and Redis is restarted once, without persistence:
// the upstream's maximum must stay ≤ 8.
//
//	cd bench && go run ./sharedqueue -d 10s
//	cd bench && go run ./sharedqueue -chaos -d 20s
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle/redislimit"
)

const (
	limit      = 8  // the upstream's concurrency limit, and the queues' N
	processes  = 4  // worker processes
	goroutines = 16 // per worker process
	workerEnv  = "SHAREDQUEUE_WORKER"
)

// result is what a worker reports on stdout.
type result struct {
	Requests   int64   `json:"requests"`
	TooMany    int64   `json:"too_many"`
	Errors     int64   `json:"errors"`
	RoundTrips int64   `json:"round_trips"`
	Waits      []int64 `json:"waits"` // µs from Acquire's call to its return, per request
}

func main() {
	if os.Getenv(workerEnv) != "" {
		if err := worker(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
	d := flag.Duration("d", 10*time.Second, "how long each mode runs")
	only := flag.String("mode", "", "run only this mode (single, shared, local8 or local2)")
	life := flag.Duration("life", 4*time.Second, "with -chaos, a worker's mean life before its SIGKILL (uniform in [life/2, 3·life/2])")
	chaos := flag.Bool("chaos", false, "SIGKILL workers at random and restart Redis once (shared queue only)")
	flag.Parse()
	if err := run(*d, *chaos, *only, *life); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// upstream counts its concurrency and refuses above limit.
type upstream struct {
	now, most, refused, served atomic.Int64
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := u.now.Add(1)
	defer u.now.Add(-1)
	for {
		m := u.most.Load()
		if n <= m || u.most.CompareAndSwap(m, n) {
			break
		}
	}
	if n > limit {
		u.refused.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	time.Sleep(time.Duration(20+rand.IntN(31)) * time.Millisecond)
	u.served.Add(1)
	_, _ = io.WriteString(w, "ok")
}

func run(d time.Duration, chaos bool, only string, life time.Duration) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	rs, err := startRedis(port)
	if err != nil {
		return err
	}
	defer func() { rs.stop() }()
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)

	if chaos {
		return runChaos(d, life, addr, srv.URL, up, &rs, port)
	}
	modes := []struct {
		mode  string
		procs int
		gs    int
	}{
		{"single", 1, processes * goroutines},
		{"shared", processes, goroutines},
		{"local8", processes, goroutines},
		{"local2", processes, goroutines},
		{"polling", processes, goroutines},
	}
	var single float64
	fmt.Printf("| mode | processes × goroutines | req/s | vs single | upstream max concurrency | 429s | Redis round trips per request | wait p50 / p99 / max (ms) |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range modes {
		if only != "" && m.mode != only {
			continue
		}
		*up = upstream{}
		if err := fresh(addr, m.mode == "shared"); err != nil {
			return err
		}
		start := time.Now()
		wctx, stopWatch := context.WithCancel(context.Background())
		watched := make(chan reclaims, 1)
		go func() { watched <- watch(wctx, addr) }()
		var total result
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for range m.procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := runWorker(context.Background(), m.mode, addr, srv.URL, d, m.gs)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				total.add(r)
			}()
		}
		wg.Wait()
		stopWatch()
		rc := <-watched
		if firstErr != nil {
			return fmt.Errorf("%s: %w", m.mode, firstErr)
		}
		el := time.Since(start).Seconds()
		rate := float64(up.served.Load()) / el
		if m.mode == "single" || single == 0 {
			single = rate
		}
		rt := "—"
		if m.mode == "shared" || m.mode == "polling" {
			rt = fmt.Sprintf("%.3f", float64(total.RoundTrips)/float64(total.Requests))
		}
		fmt.Printf("| %s | %d × %d | %.1f | %.3f | %d | %d | %s | %.0f / %.0f / %.0f |\n", m.mode, m.procs, m.gs, rate, rate/single, up.most.Load(), up.refused.Load(), rt,
			total.quantile(0.5), total.quantile(0.99), total.quantile(1))
		if m.mode == "shared" {
			fmt.Printf("  (shared: FIFO: %d grants seen from one poll to the next, %d of them past a waiter still in line ahead; %d permits expired)\n", rc.granted, rc.overtaken, rc.n)
		}
		if total.Errors > 0 {
			fmt.Printf("  (%s: %d local errors)\n", m.mode, total.Errors)
		}
	}
	return nil
}

// fresh flushes Redis and, for the shared queue, waits out its first
// lease of grace (see redislimit.Queue), so that every mode is measured
// in steady state.
func fresh(addr string, warm bool) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		return err
	}
	if !warm {
		return nil
	}
	q, err := redislimit.NewQueue(rdb, "upstream", limit, 1000)
	if err != nil {
		return err
	}
	defer q.Close()
	release, err := q.Acquire(context.Background())
	if err != nil {
		return err
	}
	release()
	return nil
}

func (r *result) add(o result) {
	r.Requests += o.Requests
	r.TooMany += o.TooMany
	r.Errors += o.Errors
	r.RoundTrips += o.RoundTrips
	r.Waits = append(r.Waits, o.Waits...)
}

// quantile returns the q-quantile of the waits, in ms.
func (r *result) quantile(q float64) float64 {
	if len(r.Waits) == 0 {
		return 0
	}
	w := slices.Clone(r.Waits)
	slices.Sort(w)
	return float64(w[min(len(w)-1, int(q*float64(len(w))))]) / 1000
}

// runWorker runs one worker process to its end and reads its result.
func runWorker(ctx context.Context, mode, addr, url string, d time.Duration, gs int) (result, error) {
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), workerEnv+"="+mode, "SQ_ADDR="+addr, "SQ_URL="+url,
		"SQ_D="+d.String(), "SQ_G="+strconv.Itoa(gs))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var r result
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(out, &r)
}

// runChaos runs the shared queue with 4 workers, each SIGKILLed at
// random (-life) and restarted, and restarts Redis once midway.
func runChaos(d, mean time.Duration, addr, url string, up *upstream, rs *redisProc, port int) error {
	if err := fresh(addr, true); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var kills, finished atomic.Int64
	var wg sync.WaitGroup
	for range processes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				life := mean/2 + rand.N(mean)
				lctx, stop := context.WithTimeout(ctx, life)
				_, err := runWorker(lctx, "shared", addr, url, time.Hour, goroutines)
				stop()
				if err != nil {
					kills.Add(1) // CommandContext SIGKILLs it
				} else {
					finished.Add(1)
				}
			}
		}()
	}
	watched := make(chan reclaims, 1)
	go func() { watched <- watch(ctx, addr) }()
	time.Sleep(d / 2)
	rs.stop()
	var err error
	if *rs, err = startRedis(port); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	fmt.Println("redis restarted (data lost)")
	wg.Wait()
	rc := <-watched
	fmt.Printf("chaos %v: %d workers SIGKILLed, %d cycles, upstream max concurrency %d (limit %d), 429s %d\n",
		d, kills.Load(), up.served.Load(), up.most.Load(), limit, up.refused.Load())
	fmt.Printf("permits that expired (their holder was killed): %d; back in the fleet at most %v after their holder's last renewal (polled every %v)\n",
		rc.n, rc.most, pollEvery)
	fmt.Printf("FIFO: %d grants seen from one poll to the next, %d of them past a waiter still in line ahead\n", rc.granted, rc.overtaken)
	if up.most.Load() > limit {
		return errors.New("the upstream saw more than the limit")
	}
	return nil
}

// pollEvery is how often watch reads the holders.
const pollEvery = 20 * time.Millisecond

// reclaims is what watch saw: how many permits left by expiry, and the
// longest time from a holder's last renewal to its permit's return.
type reclaims struct {
	n    int
	most time.Duration
	// granted counts the waiters seen in line at one poll and holding at
	// the next; overtaken counts those of them granted while a waiter
	// ahead of them at the first poll was still in line (a FIFO breach).
	granted, overtaken int
}

// watch polls the shared queue's holders (id -> expiry, server µs). A
// permit that leaves at or after its expiry was purged, not released:
// its holder stopped renewing, at its last renewal at the earliest
// (expiry − lease), so it came back at most now − (expiry − lease) after
// its holder died.
func watch(ctx context.Context, addr string) reclaims {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	key := redislimit.DefaultPrefix + "{upstream}:queue:holders"
	lineKey := redislimit.DefaultPrefix + "{upstream}:queue:line"
	last := map[string]int64{}
	var lastLine []string
	var rc reclaims
	for ctx.Err() == nil {
		time.Sleep(pollEvery)
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			continue
		}
		zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			continue
		}
		line, err := rdb.ZRange(ctx, lineKey, 0, -1).Result()
		if err != nil {
			continue
		}
		us := now.UnixMicro()
		seen := map[string]int64{}
		for _, z := range zs {
			id, _ := z.Member.(string)
			seen[id] = int64(z.Score)
		}
		inLine := map[string]bool{}
		for _, id := range line {
			inLine[id] = true
		}
		for i, id := range lastLine {
			if _, ok := seen[id]; !ok {
				continue
			}
			rc.granted++
			for _, ahead := range lastLine[:i] {
				if inLine[ahead] {
					rc.overtaken++
					break
				}
			}
		}
		lastLine = line
		for id, exp := range last {
			if _, ok := seen[id]; !ok && us >= exp {
				rc.n++
				rc.most = max(rc.most, time.Duration(us-(exp-redislimit.DefaultLease.Microseconds()))*time.Microsecond)
			}
		}
		last = seen
	}
	return rc
}

// worker runs in a child process.
func worker() error {
	d, err := time.ParseDuration(os.Getenv("SQ_D"))
	if err != nil {
		return err
	}
	gs, err := strconv.Atoi(os.Getenv("SQ_G"))
	if err != nil {
		return err
	}
	var rt roundTrips
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("SQ_ADDR"), ContextTimeoutEnabled: true})
	rdb.AddHook(&rt)
	defer rdb.Close()
	var acquire func(context.Context) (func(), error)
	switch mode := os.Getenv(workerEnv); mode {
	case "shared":
		q, err := redislimit.NewQueue(rdb, "upstream", limit, 1000)
		if err != nil {
			return err
		}
		defer q.Close()
		acquire = q.Acquire
	case "polling":
		acquire = pollingAcquire(rdb)
	case "single", "local8", "local2":
		n := limit
		if mode == "local2" {
			n = 2
		}
		q, err := queue.New(n, 1000)
		if err != nil {
			return err
		}
		acquire = q.Acquire
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: gs}}
	url := os.Getenv("SQ_URL")
	var r result
	var mu sync.Mutex
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				began := time.Now()
				release, err := acquire(context.Background())
				waited := time.Since(began)
				if err != nil {
					mu.Lock()
					r.Errors++
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				resp, err := client.Get(url)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				release()
				mu.Lock()
				r.Waits = append(r.Waits, waited.Microseconds())
				r.Requests++
				if err != nil {
					r.Errors++
				} else if resp.StatusCode == http.StatusTooManyRequests {
					r.TooMany++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.RoundTrips = rt.n.Load()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	return json.NewEncoder(w).Encode(r)
}

// unlock deletes a permit's key only if it still holds the caller's
// token, as redsync's release does.
var unlock = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// pollingAcquire returns the polling mode's acquire: a mutex per permit,
// polled.
func pollingAcquire(rdb *redis.Client) func(context.Context) (func(), error) {
	var next atomic.Int64
	return func(ctx context.Context) (func(), error) {
		token := strconv.FormatInt(int64(os.Getpid()), 10) + ":" + strconv.FormatInt(next.Add(1), 10)
		for {
			start := rand.IntN(limit)
			for i := range limit {
				key := "poll:permit:" + strconv.Itoa((start+i)%limit)
				ok, err := rdb.SetNX(ctx, key, token, 8*time.Second).Result()
				if err != nil {
					return nil, err
				}
				if ok {
					return func() { _ = unlock.Run(context.Background(), rdb, []string{key}, token).Err() }, nil
				}
			}
			select {
			case <-time.After(time.Duration(50+rand.IntN(200)) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
}

// roundTrips counts the commands a client sends, a pipeline as one.
type roundTrips struct{ n atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake([]redis.Cmder{cmd}) {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds) {
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// handshake reports whether cmds are a new connection's handshake (HELLO,
// CLIENT SETINFO), which is not a round trip per request.
func handshake(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if n := c.Name(); n != "hello" && n != "client" {
			return false
		}
	}
	return true
}

// redisProc is a redis-server on a fixed port, so that it can be
// restarted where the workers look for it.
type redisProc struct{ cmd *exec.Cmd }

func startRedis(port int) (redisProc, error) {
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return redisProc{}, fmt.Errorf("start redis-server: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer rdb.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if rdb.Ping(context.Background()).Err() == nil {
			return redisProc{cmd}, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return redisProc{}, errors.New("redis-server did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p redisProc) stop() {
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
