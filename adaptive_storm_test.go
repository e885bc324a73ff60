package egress_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// hiddenUp is a headerless upstream: it admits (200) or refuses with a
// bare 429 (or 503), according to a hidden limit of one shape.
type hiddenUp struct {
	shape  string // "bucket", "fixed", "log"
	limit  func(at time.Duration) int
	burst  int
	status int // refusal status, 429 by default
	start  time.Time
	// hostile answers instead while it returns ok.
	hostile func(at time.Duration, h http.Header) (int, bool)
	noise   float64 // probability of a 503 unrelated to load
	rng     *rand.Rand

	mu       sync.Mutex
	level    float64
	last     time.Time
	win      int64
	count    int
	log      []time.Time
	admitted []time.Duration
	refused  []time.Duration
	perKey   map[string]int
}

func (u *hiddenUp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	at := now.Sub(u.start)
	if u.perKey == nil {
		u.perKey = map[string]int{}
	}
	if u.hostile != nil {
		if st, ok := u.hostile(at, w.Header()); ok {
			u.refused = append(u.refused, at)
			w.WriteHeader(st)
			return
		}
	}
	if u.noise > 0 && u.rng.Float64() < u.noise {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	L := u.limit(at)
	ok := false
	switch u.shape {
	case "bucket":
		if u.last.IsZero() {
			u.level = float64(u.burst)
		} else {
			u.level = min(float64(u.burst), u.level+now.Sub(u.last).Seconds()*float64(L))
		}
		u.last = now
		if u.level >= 1 {
			u.level--
			ok = true
		}
	case "fixed":
		idx := int64(at / time.Second)
		if idx != u.win {
			u.win, u.count = idx, 0
		}
		if u.count < L {
			u.count++
			ok = true
		}
	case "log":
		cut := 0
		for cut < len(u.log) && !u.log[cut].After(now.Add(-time.Second)) {
			cut++
		}
		u.log = u.log[cut:]
		if len(u.log) < L {
			u.log = append(u.log, now)
			ok = true
		}
	}
	if !ok {
		u.refused = append(u.refused, at)
		st := u.status
		if st == 0 {
			st = http.StatusTooManyRequests
		}
		w.WriteHeader(st)
		return
	}
	u.admitted = append(u.admitted, at)
	u.perKey[r.URL.Host]++
	w.WriteHeader(http.StatusOK)
}

func (u *hiddenUp) between(from, to time.Duration) (adm, ref int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.admitted {
		if a >= from && a < to {
			adm++
		}
	}
	for _, a := range u.refused {
		if a >= from && a < to {
			ref++
		}
	}
	return
}

type learnResult struct {
	rates            []float64 // every 100 ms
	lo, hi           float64   // after settle
	within           time.Duration
	util, thr        float64
	failed           int
	first            error
	admitted, refuse int
	maxGap           time.Duration
}

type learnConfig struct {
	up       *hiddenUp
	ceiling  float64
	workers  int
	latency  time.Duration // each way
	run      time.Duration
	settle   time.Duration
	hidden   func(at time.Duration) int
	policy   retryafter.Policy
	opts     []throttle.Option
	hosts    []string
	watchKey string
	// stagger starts worker w w×stagger late, and adds w×stagger to its
	// latency each way: its requests and answers then never share an
	// instant with another worker's, whose order on a bubble's one clock
	// is the scheduler's, not even when a pause releases every worker
	// at once.
	stagger time.Duration
}

// learnRun runs the README's recipe against c.up inside the current bubble.
func learnRun(t *testing.T, c learnConfig) learnResult {
	a, err := throttle.NewAdaptive(throttle.PerSecond(int(c.ceiling)), c.opts...)
	require.NoError(t, err)
	c.up.start = time.Now()
	base := &simBase{h: c.up, in: spread(c.latency), out: spread(c.latency)}
	var inner http.RoundTripper = base
	if c.stagger > 0 {
		inner = roundTripFunc(func(req *http.Request) (*http.Response, error) {
			extra := time.Duration(req.Context().Value(workerKey{}).(int)) * c.stagger
			time.Sleep(extra)
			resp, err := base.RoundTrip(req)
			time.Sleep(extra)
			return resp, err
		})
	}
	client := &http.Client{Transport: egress.NewTransport(inner, egress.WithLimiter(a), egress.WithRetry(c.policy))}
	if c.hosts == nil {
		c.hosts = []string{"api.test"}
	}
	if c.watchKey == "" {
		c.watchKey = c.hosts[0]
	}
	var res learnResult
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				res.rates = append(res.rates, a.Rate(c.watchKey))
			}
		}
	}()
	end := time.Now().Add(c.run)
	var mu sync.Mutex
	for w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := c.hosts[w%len(c.hosts)]
			time.Sleep(time.Duration(w) * c.stagger)
			for time.Now().Before(end) {
				ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), workerKey{}, w), end)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v1", nil)
				resp, err := client.Do(req)
				cancel()
				if err == nil {
					resp.Body.Close()
					continue
				}
				if !isDeadlineRefusal(err) && ctx.Err() == nil {
					mu.Lock()
					res.failed++
					if res.first == nil {
						res.first = err
					}
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				return
			}
		}()
	}
	time.Sleep(c.run)
	close(stop)
	wg.Wait()
	res.maxGap = base.maxGap(c.up.start, c.up.start.Add(c.run))
	res.lo, res.hi = -1, -1
	s := int(c.settle / (100 * time.Millisecond))
	for i, r := range res.rates {
		if i < s {
			continue
		}
		if res.lo < 0 || r < res.lo {
			res.lo = r
		}
		res.hi = max(res.hi, r)
	}
	// when the rate entered ±10% and stayed
	res.within = -1
	for i := len(res.rates) - 1; i >= 0; i-- {
		h := float64(c.hidden(time.Duration(i+1) * 100 * time.Millisecond))
		if res.rates[i] < 0.9*h || res.rates[i] > 1.1*h {
			res.within = time.Duration(i+1) * 100 * time.Millisecond
			break
		}
	}
	if res.within < 0 {
		res.within = 0
	}
	adm, ref := c.up.between(c.settle, c.run)
	res.admitted, res.refuse = adm, ref
	var allowed float64
	for at := c.settle; at < c.run; at += 10 * time.Millisecond {
		allowed += float64(c.hidden(at)) / 100
	}
	res.util = float64(adm) / allowed
	if adm+ref > 0 {
		res.thr = float64(ref) / float64(adm+ref)
	}
	return res
}

// workerKey carries a learnRun worker's number in its requests' context.
type workerKey struct{}

func constLimit(n int) func(time.Duration) int { return func(time.Duration) int { return n } }

// After an upstream throttled everything for 10 s, the README recipe
// with 32 callers comes back to the hidden limit: from 20 s after the
// storm, the learned rate is within ±10% and the limit is at least 80%
// used. Before the fix, 30-45 s after the storm the key still sent 2-4/s
// against a hidden 100/s: the bookings made at the floor (one a second,
// 32 callers deep) were never moved earlier as the rate climbed, and the
// climb is capped at twice what was admitted.
func TestAcceptanceAdaptiveRecoversAfterStorm(t *testing.T) {
	for _, tt := range []struct {
		name    string
		status  int
		workers int
		hidden  int
	}{
		{name: "429, 32 callers, 100/s", status: http.StatusTooManyRequests, workers: 32, hidden: 100},
		{name: "503, 32 callers, 100/s", status: http.StatusServiceUnavailable, workers: 32, hidden: 100},
		{name: "429, 8 callers, 100/s", status: http.StatusTooManyRequests, workers: 8, hidden: 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const from, to, run = 5 * time.Second, 15 * time.Second, 50 * time.Second
				up := &hiddenUp{shape: "bucket", limit: constLimit(tt.hidden), burst: max(tt.hidden/10, 1),
					hostile: func(at time.Duration, h http.Header) (int, bool) { return tt.status, at >= from && at < to }}
				r := learnRun(t, learnConfig{up: up, ceiling: 10000, workers: tt.workers, latency: time.Millisecond / 2,
					run: run, settle: to + 20*time.Second, hidden: constLimit(tt.hidden),
					policy: retryafter.Policy{Jitter: func(m time.Duration) time.Duration { return m / 2 }}})
				lo := 1e9
				for _, x := range r.rates {
					lo = min(lo, x)
				}
				t.Logf("lowest rate %.2f; from %v: rate in [%.1f, %.1f], %.3f used, %.4f throttled", lo, to+20*time.Second, r.lo, r.hi, r.util, r.thr)
				require.GreaterOrEqual(t, lo, float64(throttle.DefaultFloorPerSecond), "below the floor")
				require.GreaterOrEqual(t, r.lo, 0.9*float64(tt.hidden), "learned rate, 20 s after the storm")
				require.LessOrEqual(t, r.hi, 1.1*float64(tt.hidden), "learned rate, 20 s after the storm")
				require.GreaterOrEqual(t, r.util, 0.8, "utilization, 20 s after the storm")
			})
		})
	}
}
