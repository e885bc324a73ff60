// Command leases runs the bench scenario "hot shared budget" of issue 15:
// OS processes share one token bucket in Redis (2000/s, burst 400) on one
// key, in three modes run in the same process tree, interleaved (and a
// fourth in overload):
//
//   - lease: redislimit.NewTokenBucket with WithSlotLease(100 ms) and
//     FailShare;
//   - onetrip: the same bucket without leases, one script run per
//     decision;
//   - redis_rate: go-redis/redis_rate's Allow with the same limit, a
//     refused caller sleeping its RetryAfter and asking again;
//   - lease-strict (overload only): lease on a bucket of 1800/s, burst
//     200, WithSlotLease(50 ms), whose bound for any 1 s window is 2000.
//
// Every admitted request's time (after Wait) is reported to the parent,
// which counts the most admitted in any 1 s window and what an upstream
// enforcing the same bucket on those times would have refused (429s).
// Scenarios (-only picks one):
//
//   - steady: 4 processes × 16 goroutines asking 1200/s in all, at a
//     steady pace: round trips per admitted request;
//
//   - overload: 4 × 64 goroutines asking as fast as they are admitted
//     (maxWait 200 ms): the most in any 1 s window, and 429s;
//
//   - decisions: 1 process × 64 goroutines calling Allow on one key:
//     decisions per second;
//
//   - swap: process 1 hot (64 goroutines, as fast as admitted) until
//     -swap, then idle (64 goroutines at 1/s each), process 2 the other
//     way round, processes 3 and 4 idle (16 goroutines at 1/s each);
//     shares per 250 ms go to leases/shares.csv and leases/shares.png;
//
//   - outage: overload, Redis SIGSTOPped for -stop from a third of -d;
//
//   - kill: overload, one process SIGKILLed at half of -d, lease and
//     onetrip: each worker streams what it leased, handed out and
//     admitted to the parent as it goes (tally.go), so that the killed
//     one's loss is measured up to the instant it died.
//
//     cd bench && go run ./leases -d 10s -swap 30s
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/egress-go/egress/throttle"
	"github.com/egress-go/egress/throttle/redislimit"
)

const (
	rate      = 2000 // per second
	burst     = 400
	span      = 100 * time.Millisecond
	workerEnv = "LEASES_WORKER"

	// lease-strict configures the bucket so that its own bound for any
	// 1 s window, burst + rate × 1 s, is the limit itself: 200 + 1800.
	strictRate  = 1800
	strictBurst = 200
	strictSpan  = 50 * time.Millisecond // keeps 90 of the 200 in reserve
)

// result is what a worker reports on stdout.
type result struct {
	Admitted   []int64 `json:"admitted"` // unix µs, when each admitted request went
	Decisions  int64   `json:"decisions"`
	Refused    int64   `json:"refused"`
	Errors     int64   `json:"errors"`
	RoundTrips int64   `json:"round_trips"` // network exchanges: a pipeline is one
	Scripts    int64   `json:"scripts"`     // commands sent
}

func main() {
	if os.Getenv(workerEnv) != "" {
		if err := worker(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
	d := flag.Duration("d", 10*time.Second, "how long each run lasts")
	swap := flag.Duration("swap", 30*time.Second, "swap: when the hot process changes (the run lasts twice this)")
	stop := flag.Duration("stop", 10*time.Second, "outage: how long Redis stays SIGSTOPped")
	passes := flag.Int("passes", 3, "passes of each scenario that compares modes")
	only := flag.String("only", "", "run only this scenario")
	flag.Parse()
	if err := run(*d, *swap, *stop, *passes, *only); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// job is what one worker process does.
type job struct {
	mode       string
	goroutines int
	pace       float64       // requests per second per goroutine when idle; 0: as fast as admitted
	maxWait    time.Duration // -1: Allow, counting decisions
	hotFrom    time.Duration // from start, as fast as admitted (with hotTo > hotFrom)
	hotTo      time.Duration
}

type bench struct {
	addr  string
	redis *exec.Cmd
	// tallies holds, after runAll, what each of its workers streamed
	// while it ran, which outlives a worker killed with SIGKILL.
	tallies []*tally
}

func run(d, swap, stop time.Duration, passes int, only string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	b := &bench{addr: "127.0.0.1:" + strconv.Itoa(port)}
	if b.redis, err = startRedis(port); err != nil {
		return err
	}
	defer func() { _ = b.redis.Process.Kill(); _ = b.redis.Wait() }()
	modes := []string{"lease", "onetrip", "redis_rate"}
	want := func(s string) bool { return only == "" || only == s }
	if want("steady") {
		fmt.Printf("\n## steady: 4 × 16 goroutines asking 1200/s in all, %v, %d passes\n\n", d, passes)
		fmt.Println("| pass | mode | admitted/s | round trips per admitted | scripts per admitted | most in 1 s | 429s | errors |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for p := range passes {
			for _, m := range modes {
				rs, start, err := b.runAll(d, 4, job{mode: m, goroutines: 16, pace: 1200.0 / 64, maxWait: time.Second}, nil)
				if err != nil {
					return err
				}
				report(p, m, rs, start, d)
			}
		}
	}
	if want("overload") {
		fmt.Printf("\n## overload: 4 × 64 goroutines as fast as admitted (maxWait 200 ms), %v, %d passes\n\n", d, passes)
		fmt.Println("| pass | mode | admitted/s | round trips per admitted | scripts per admitted | most in 1 s | 429s | errors |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for p := range passes {
			for _, m := range append(modes, "lease-strict") {
				rs, start, err := b.runAll(d, 4, job{mode: m, goroutines: 64, maxWait: 200 * time.Millisecond}, nil)
				if err != nil {
					return err
				}
				report(p, m, rs, start, d)
			}
		}
	}
	if want("decisions") {
		fmt.Printf("\n## decisions: 1 × 64 goroutines calling Allow on one key, %v, %d passes\n\n", d, passes)
		fmt.Println("| pass | mode | decisions/s | admitted/s | round trips per decision |")
		fmt.Println("|---|---|---|---|---|")
		for p := range passes {
			for _, m := range modes {
				rs, _, err := b.runAll(d, 1, job{mode: m, goroutines: 64, maxWait: -1}, nil)
				if err != nil {
					return err
				}
				r := rs[0]
				fmt.Printf("| %d | %s | %.0f | %.0f | %.4f |\n", p+1, m, float64(r.Decisions)/d.Seconds(),
					float64(len(r.Admitted))/d.Seconds(), float64(r.RoundTrips)/float64(max(r.Decisions, 1)))
			}
		}
	}
	if want("swap") {
		if err := b.swap(swap); err != nil {
			return err
		}
	}
	if want("outage") {
		if err := b.outage(d, stop); err != nil {
			return err
		}
	}
	if want("kill") {
		if err := b.kill(d, passes); err != nil {
			return err
		}
	}
	return nil
}

// report prints one row of the steady and overload tables.
func report(pass int, mode string, rs []result, start time.Time, d time.Duration) {
	all, trips, scripts, errs := merge(rs)
	most := mostInWindow(all, time.Second)
	fmt.Printf("| %d | %s | %.0f | %.4f | %.4f | %d | %d | %d |\n", pass+1, mode, float64(len(all))/d.Seconds(),
		float64(trips)/float64(max(len(all), 1)), float64(scripts)/float64(max(len(all), 1)), most, upstream429s(all), errs)
}

func merge(rs []result) (all []int64, trips, scripts, errs int64) {
	for _, r := range rs {
		all = append(all, r.Admitted...)
		trips += r.RoundTrips
		scripts += r.Scripts
		errs += r.Errors
	}
	slices.Sort(all)
	return all, trips, scripts, errs
}

// mostInWindow returns the most of the sorted times (µs) in any window
// of length w.
func mostInWindow(ts []int64, w time.Duration) int {
	most, j := 0, 0
	for i := range ts {
		for ts[i]-ts[j] >= w.Microseconds() {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// upstream429s counts the requests that an upstream enforcing the same
// bucket (GCRA, rate/s, burst) on the sorted times would refuse.
func upstream429s(ts []int64) int {
	interval := int64(1e6 / rate)
	tat, refused := int64(0), 0
	for _, at := range ts {
		if tat > 0 && at < tat-(burst-1)*interval {
			refused++
			continue
		}
		tat = max(tat, at) + interval
	}
	return refused
}

// runAll runs n workers doing j (jobs[i] for worker i when given), all
// starting at one instant, and returns their results. during, if not
// nil, runs meanwhile with the start time and the workers' processes.
func (b *bench) runAll(d time.Duration, n int, j job, during func(start time.Time, procs []*exec.Cmd), jobs ...job) ([]result, time.Time, error) {
	if err := fresh(b.addr); err != nil {
		return nil, time.Time{}, err
	}
	start := time.Now().Add(1500 * time.Millisecond)
	cmds := make([]*exec.Cmd, n)
	outs := make([]*strings.Builder, n)
	b.tallies = make([]*tally, n)
	var reading sync.WaitGroup
	defer reading.Wait()
	for i := range n {
		jj := j
		if i < len(jobs) {
			jj = jobs[i]
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), workerEnv+"="+jj.mode, "LW_ADDR="+b.addr,
			"LW_START="+strconv.FormatInt(start.UnixMicro(), 10), "LW_D="+d.String(),
			"LW_G="+strconv.Itoa(jj.goroutines), "LW_PACE="+strconv.FormatFloat(jj.pace, 'f', -1, 64),
			"LW_MAXWAIT="+jj.maxWait.String(), "LW_HOTFROM="+jj.hotFrom.String(), "LW_HOTTO="+jj.hotTo.String())
		cmd.Stderr = os.Stderr
		outs[i] = &strings.Builder{}
		cmd.Stdout = outs[i]
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, start, err
		}
		cmd.ExtraFiles = []*os.File{pw} // the worker's fd 3: its tally stream
		if err := cmd.Start(); err != nil {
			return nil, start, err
		}
		_ = pw.Close()
		cmds[i] = cmd
		t := &tally{}
		b.tallies[i] = t
		reading.Add(1)
		go func() {
			defer reading.Done()
			defer pr.Close()
			t.read(pr)
		}()
	}
	if during != nil {
		during(start, cmds)
	}
	var rs []result
	var errs []error
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) && !ee.Exited() {
				continue // killed on purpose
			}
			errs = append(errs, err)
			continue
		}
		var r result
		if err := json.Unmarshal([]byte(outs[i].String()), &r); err != nil {
			errs = append(errs, err)
			continue
		}
		rs = append(rs, r)
	}
	return rs, start, errors.Join(errs...)
}

// perSecond returns, for each second from start, how many times fall in
// it.
func perSecond(ts []int64, start time.Time, d time.Duration) []int {
	out := make([]int, int(d/time.Second))
	for _, t := range ts {
		i := int((t - start.UnixMicro()) / 1e6)
		if i >= 0 && i < len(out) {
			out[i]++
		}
	}
	return out
}

func (b *bench) swap(half time.Duration) error {
	d := 2 * half
	idle := job{mode: "lease", goroutines: 16, pace: 1, maxWait: 200 * time.Millisecond}
	first, second := idle, idle
	first.hotFrom, first.hotTo = 0, half
	second.hotFrom, second.hotTo = half, d
	first.goroutines, second.goroutines = 64, 64
	rs, start, err := b.runAll(d, 4, idle, nil, first, second)
	if err != nil {
		return err
	}
	fmt.Printf("\n## swap: process 1 hot for %v, then process 2 (64 goroutines as fast as admitted); processes 3 and 4 idle (16 goroutines at 1/s)\n\n", half)
	all, trips, _, errs := merge(rs)
	// Utilization from 1 s in (the first lease) to the end.
	in := 0
	for _, t := range all {
		if t >= start.UnixMicro()+1e6 {
			in++
		}
	}
	util := float64(in) / (rate * (d.Seconds() - 1))
	fmt.Printf("utilization %.4f (admitted %d from 1 s to %v, of %d), most in 1 s %d, 429s %d, errors %d, round trips per admitted %.4f\n\n",
		util, in, d, int(rate*(d.Seconds()-1)), mostInWindow(all, time.Second), upstream429s(all), errs, float64(trips)/float64(len(all)))
	// Shares per 250 ms around the swap, and how soon the new hot one
	// reached 95% of what the others leave it.
	step := 250 * time.Millisecond
	n := int(d / step)
	share := make([][]int, len(rs))
	for p, r := range rs {
		share[p] = make([]int, n)
		for _, t := range r.Admitted {
			if i := int((t - start.UnixMicro()) / step.Microseconds()); i >= 0 && i < n {
				share[p][i]++
			}
		}
	}
	fmt.Println("| from (s) | process 1 /s | process 2 /s | process 3 /s | process 4 /s | fleet /s |")
	fmt.Println("|---|---|---|---|---|---|")
	reached := time.Duration(-1)
	for i := range n {
		at := time.Duration(i) * step
		total := 0
		for p := range share {
			total += share[p][i]
		}
		// The others' steady take: process 1 idles at 64/s once swapped,
		// processes 3 and 4 at 16/s.
		need := (rate - 64 - 16 - 16) * step.Seconds()
		if at >= half && reached < 0 && float64(share[1][i]) >= 0.95*need {
			reached = at + step - half
		}
		if at < 2*time.Second || (at >= half-time.Second && at < half+3*time.Second) || at >= d-time.Second {
			fmt.Printf("| %.2f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", at.Seconds(), float64(share[0][i])/step.Seconds(),
				float64(share[1][i])/step.Seconds(), float64(share[2][i])/step.Seconds(), float64(share[3][i])/step.Seconds(), float64(total)/step.Seconds())
		}
	}
	fmt.Printf("\nnew hot process at ≥ 95%% of its need (the rate less the others' steady 96/s) within %v of the swap (250 ms steps)\n", reached)
	if err := writeShares(share, step); err != nil {
		return err
	}
	return plotShares(share, step)
}

// writeShares writes the shares per step as CSV for a plot.
func writeShares(share [][]int, step time.Duration) error {
	f, err := os.Create("leases/shares.csv")
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "seconds,p1,p2,p3,p4")
	for i := range share[0] {
		fmt.Fprintf(w, "%.2f", (time.Duration(i) * step).Seconds())
		for p := range share {
			fmt.Fprintf(w, ",%.0f", float64(share[p][i])/step.Seconds())
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

func (b *bench) outage(d, stop time.Duration) error {
	d = max(d, stop+10*time.Second)
	from := d / 3
	j := job{mode: "lease", goroutines: 64, maxWait: 200 * time.Millisecond}
	rs, start, err := b.runAll(d, 4, j, func(start time.Time, _ []*exec.Cmd) {
		time.Sleep(time.Until(start.Add(from)))
		_ = b.redis.Process.Signal(syscall.SIGSTOP)
		time.Sleep(stop)
		_ = b.redis.Process.Signal(syscall.SIGCONT)
	})
	if err != nil {
		return err
	}
	all, _, _, errs := merge(rs)
	secs := perSecond(all, start, d)
	fmt.Printf("\n## outage: 4 × 64 goroutines as fast as admitted, lease + FailShare, Redis SIGSTOPped from %v to %v\n\n", from, from+stop)
	fmt.Println("| second | admitted | × rate |")
	fmt.Println("|---|---|---|")
	for i, n := range secs {
		mark := ""
		if time.Duration(i)*time.Second >= from && time.Duration(i)*time.Second < from+stop {
			mark = " (stopped)"
		}
		fmt.Printf("| %d%s | %d | %.3f |\n", i, mark, n, float64(n)/rate)
	}
	var during, after []int64
	for _, t := range all {
		switch at := time.Duration(t-start.UnixMicro()) * time.Microsecond; {
		case at >= from && at < from+stop:
			during = append(during, t)
		case at >= from+stop+time.Second:
			after = append(after, t)
		}
	}
	fmt.Printf("\nduring: most in 1 s %d (%.3f× the rate); from 1 s after: most in 1 s %d, 429s %d; errors %d\n",
		mostInWindow(during, time.Second), float64(mostInWindow(during, time.Second))/rate,
		mostInWindow(after, time.Second), upstream429s(after), errs)
	return nil
}

// kill SIGKILLs process 4 of an overload run at half of d, for the lease
// mode and, to compare, onetrip, and reports what the killed process
// leased and used, measured from its stream up to the instant it died.
func (b *bench) kill(d time.Duration, passes int) error {
	fmt.Printf("\n## kill: 4 × 64 goroutines as fast as admitted (maxWait 200 ms), process 4 SIGKILLed at %v, %d passes\n\n", d/2, passes)
	fmt.Println("| pass | mode | survivors /s, each second from the kill | survivors: most in 1 s, 429s, errors | killed: leases (mean, largest) | leased | handed to callers | admitted | left in the lease | in callers' hands | never used, in mean leases |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for p := range passes {
		for _, m := range []string{"lease", "onetrip"} {
			j := job{mode: m, goroutines: 64, maxWait: 200 * time.Millisecond}
			rs, start, err := b.runAll(d, 4, j, func(start time.Time, procs []*exec.Cmd) {
				time.Sleep(time.Until(start.Add(d / 2)))
				_ = procs[3].Process.Kill()
			})
			if err != nil {
				return err
			}
			all, _, _, errs := merge(rs)
			var after []string
			for i, n := range perSecond(all, start, d) {
				if time.Duration(i)*time.Second >= d/2-time.Second/2 {
					after = append(after, strconv.Itoa(n))
				}
			}
			t := b.tallies[3]
			mean := float64(t.leased) / float64(max(t.leases, 1))
			lost := t.leased - t.admitted
			inLease := t.leased - t.reserved
			if m != "lease" { // every unit is booked for a caller
				lost, inLease = t.reserved-t.admitted, 0
			}
			inLeases := "—"
			if m == "lease" {
				inLeases = fmt.Sprintf("%.2f", float64(lost)/max(mean, 1))
			}
			fmt.Printf("| %d | %s | %s | %d, %d, %d | %d (%.0f, %d) | %d | %d | %d | %d | %d | %d (%s) |\n", p+1, m,
				strings.Join(after, ", "), mostInWindow(all, time.Second), upstream429s(all), errs,
				t.leases, mean, t.maxLease, t.leased, t.reserved, t.admitted, inLease, t.reserved-t.admitted,
				lost, inLeases)
		}
	}
	return nil
}

// fresh empties Redis.
func fresh(addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	return rdb.FlushAll(context.Background()).Err()
}

// worker runs in a child process.
func worker() error {
	env := func(k string) string { return os.Getenv("LW_" + k) }
	startUs, _ := strconv.ParseInt(env("START"), 10, 64)
	start := time.UnixMicro(startUs)
	d, _ := time.ParseDuration(env("D"))
	gs, _ := strconv.Atoi(env("G"))
	pace, _ := strconv.ParseFloat(env("PACE"), 64)
	maxWait, _ := time.ParseDuration(env("MAXWAIT"))
	hotFrom, _ := time.ParseDuration(env("HOTFROM"))
	hotTo, _ := time.ParseDuration(env("HOTTO"))
	s := newStreamer()
	rt := roundTrips{s: s}
	rdb := redis.NewClient(&redis.Options{Addr: env("ADDR"), ContextTimeoutEnabled: true, PoolSize: 2 * gs, MaxRetries: -1})
	rdb.AddHook(&rt)
	defer rdb.Close()
	take, closeFn, err := limiter(os.Getenv(workerEnv), rdb, s.reserved)
	if err != nil {
		return err
	}
	var r result
	var mu sync.Mutex
	var decisions, refused, errs atomic.Int64
	time.Sleep(time.Until(start))
	end := start.Add(d)
	var wg sync.WaitGroup
	for g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now().Add(time.Duration(float64(g) / float64(gs) / max(pace, 1e-9) * 1e9))
			if pace == 0 {
				next = time.Now()
			}
			for {
				now := time.Now()
				if !now.Before(end) {
					return
				}
				at := now.Sub(start)
				hot := pace == 0 || (hotTo > hotFrom && at >= hotFrom && at < hotTo)
				if hot {
					// An idle spell after it starts from now, the
					// goroutines spread over one pace as at the start.
					next = now.Add(time.Duration(float64(g) / float64(gs) / max(pace, 1e-9) * 1e9))
				} else {
					if now.Before(next) {
						time.Sleep(min(next.Sub(now), 50*time.Millisecond))
						continue
					}
					next = next.Add(time.Duration(1e9 / pace))
				}
				ok, err := take(maxWait)
				decisions.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
					time.Sleep(10 * time.Millisecond)
				case ok:
					t := time.Now().UnixMicro()
					mu.Lock()
					r.Admitted = append(r.Admitted, t)
					mu.Unlock()
					s.admitted()
				default:
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	closeFn()
	r.Decisions, r.Refused, r.Errors = decisions.Load(), refused.Load(), errs.Load()
	r.RoundTrips, r.Scripts = rt.trips.Load(), rt.cmds.Load()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	return json.NewEncoder(w).Encode(r)
}

// limiter returns the mode's way to take one unit: waiting up to maxWait
// for it (after which it reports whether it went), or with maxWait < 0,
// deciding at once. reserved runs when a unit is handed to the caller,
// before it waits for its slot.
func limiter(mode string, rdb *redis.Client, reserved func()) (func(maxWait time.Duration) (bool, error), func(), error) {
	ctx := context.Background()
	switch mode {
	case "lease", "onetrip", "lease-strict":
		opts := []redislimit.Option{}
		r, b := rate, burst
		switch mode {
		case "lease":
			opts = append(opts, redislimit.WithSlotLease(span), redislimit.WithFailurePolicy(redislimit.FailShare))
		case "lease-strict":
			r, b = strictRate, strictBurst
			opts = append(opts, redislimit.WithSlotLease(strictSpan), redislimit.WithFailurePolicy(redislimit.FailShare))
		}
		tb, err := redislimit.NewTokenBucket(rdb, throttle.PerSecond(r), b, opts...)
		if err != nil {
			return nil, nil, err
		}
		return func(maxWait time.Duration) (bool, error) {
			if maxWait < 0 {
				return tb.AllowN(ctx, "api", 1)
			}
			r, err := tb.Reserve(ctx, "api", 1, maxWait)
			if err != nil || !r.OK {
				return false, err
			}
			reserved()
			return true, r.Wait(ctx)
		}, func() { _ = tb.Close() }, nil
	case "redis_rate":
		lim := redis_rate.NewLimiter(rdb)
		limit := redis_rate.Limit{Rate: rate, Burst: burst, Period: time.Second}
		return func(maxWait time.Duration) (bool, error) {
			deadline := time.Now().Add(maxWait)
			for {
				res, err := lim.Allow(ctx, "api", limit)
				if err != nil {
					return false, err
				}
				if res.Allowed > 0 {
					return true, nil
				}
				if maxWait < 0 || time.Now().Add(res.RetryAfter).After(deadline) {
					return false, nil
				}
				time.Sleep(res.RetryAfter)
			}
		}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown mode %q", mode)
}

// roundTrips counts network exchanges with Redis (a pipeline is one) and
// the commands in them, leaving out connection handshakes, and streams
// the lease mode's replies to the parent.
type roundTrips struct {
	trips, cmds atomic.Int64
	s           *streamer
}

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.trips.Add(1)
		r.cmds.Add(1)
		err := next(ctx, cmd)
		r.s.reply(cmd)
		return err
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds) {
			r.trips.Add(1)
			r.cmds.Add(int64(len(cmds)))
		}
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.s.reply(c)
		}
		return err
	}
}

// handshake reports whether cmds are go-redis's connection set-up (HELLO,
// CLIENT SETINFO...), not a call of the limiter's.
func handshake(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		switch strings.ToLower(c.Name()) {
		case "hello", "client", "auth", "select", "ping":
		default:
			return false
		}
	}
	return true
}

func startRedis(port int) (*exec.Cmd, error) {
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer rdb.Close()
	for range 100 {
		if rdb.Ping(context.Background()).Err() == nil {
			return cmd, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return nil, errors.New("redis-server did not start")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
