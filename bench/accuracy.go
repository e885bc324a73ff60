package main

import (
	"context"
	"math"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/egress-go/egress/throttle"
)

// accuracy is issue 4's waiting-accuracy measurement: how late callers
// queued on one key wake against their reserved slot, next to a bare
// time.Sleep of the same delays.
type accuracy struct {
	callers    int
	rate       throttle.Rate
	late       []time.Duration // egress: wake-up minus reserved slot, in slot order
	sleepLate  []time.Duration // time.Sleep of the same delays: wake-up minus asked
	cpu        time.Duration   // process CPU while the egress callers waited
	wall       time.Duration
	byDecile   [10]time.Duration // p99 lateness per tenth of the run, by slot index
	slopePer1k time.Duration     // least-squares growth of lateness per 1 000 slots
}

// measureAccuracy queues 64 callers on one key of a token bucket at 1000/s
// (burst 1), so each sleeps about 64 ms to a slot of its own, for 10 000
// wake-ups (1 000 with smoke), then replays every delay with time.Sleep.
func measureAccuracy(ctx context.Context, smoke bool) (accuracy, error) {
	a := accuracy{callers: 64, rate: throttle.PerSecond(1000)}
	wakeups := 10_000 + 64*2 // a round of warm-up, and rounding
	if smoke {
		wakeups = 1_000
	}
	tb, err := throttle.NewTokenBucket(a.rate, 1)
	if err != nil {
		return a, err
	}
	type sample struct {
		slot  time.Time
		delay time.Duration
		late  time.Duration
	}
	samples := make([][]sample, a.callers)
	per := wakeups / a.callers
	cpu0 := processCPU()
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, a.callers)
	for g := range a.callers {
		wg.Go(func() {
			for range per {
				before := time.Now()
				r, err := tb.Reserve(ctx, "key", 1, -1)
				if err != nil {
					errs[g] = err
					return
				}
				slot := before.Add(r.Delay)
				if err := r.Wait(ctx); err != nil {
					errs[g] = err
					return
				}
				samples[g] = append(samples[g], sample{slot: slot, delay: r.Delay, late: time.Since(slot)})
			}
		})
	}
	wg.Wait()
	a.wall, a.cpu = time.Since(t0), processCPU()-cpu0
	for _, err := range errs {
		if err != nil {
			return a, err
		}
	}
	all := slices.Concat(samples...)
	slices.SortFunc(all, func(x, y sample) int { return x.slot.Compare(y.slot) })
	for _, s := range all[a.callers:] { // the first round fills the queue: warm-up
		a.late = append(a.late, s.late)
	}
	// The same delays again, each caller sleeping its own sequence.
	sleepLate := make([][]time.Duration, a.callers)
	for g := range a.callers {
		wg.Go(func() {
			for i, s := range samples[g] {
				before := time.Now()
				time.Sleep(s.delay)
				if i > 0 { // as above, without each caller's first round
					sleepLate[g] = append(sleepLate[g], time.Since(before)-s.delay)
				}
			}
		})
	}
	wg.Wait()
	a.sleepLate = slices.Concat(sleepLate...)
	n := len(a.late)
	for d := range 10 {
		a.byDecile[d] = quantile(a.late[d*n/10:(d+1)*n/10], 0.99)
	}
	a.slopePer1k = slope(a.late) * 1000
	return a, nil
}

// quantile returns the q-quantile of ds, by nearest rank.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// slope fits ys against their index by least squares.
func slope(ys []time.Duration) time.Duration {
	n := float64(len(ys))
	var sx, sy, sxx, sxy float64
	for i, y := range ys {
		x := float64(i)
		sx, sy, sxx, sxy = sx+x, sy+float64(y), sxx+x*x, sxy+x*float64(y)
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return time.Duration((n*sxy - sx*sy) / den)
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
