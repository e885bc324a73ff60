package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/egress-go/egress/internal/upstream"
)

// This file holds the scenarios of issue 13 (real third-party limiters as
// upstreams, and a headerless upstream with a hidden limit) and issue 11
// item 12 (an nginx-like leaky bucket).

// front builds a fresh third-party limiter in front of a handler that
// answers 200, and a func that releases it.
type front func() (http.Handler, func(), error)

// okHandler is what every limiter guards.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

// httprateFront is go-chi/httprate as its README shows, with one limit for
// every caller: httprate.LimitAll(limit, window). A sliding-window counter
// whose windows start at the instant the limiter is built (v0.16.1 aligns
// an in-memory limiter so); every answer carries X-RateLimit-Limit,
// -Remaining and -Reset (the window's end as a Unix epoch second,
// truncated), and a 429 carries Retry-After: the window length in seconds.
func httprateFront(limit int, window time.Duration) front {
	return func() (http.Handler, func(), error) {
		return httprate.LimitAll(limit, window)(okHandler), func() {}, nil
	}
}

// throttledFront is throttled/throttled v2 as its package example shows: a
// GCRA of rate per second in memstore, with MaxBurst maxBurst (maxBurst+1
// at once), through HTTPRateLimiterCtx varying by path. Every answer
// carries X-RateLimit-Limit, -Remaining and -Reset (seconds until the
// bucket is full, rounded up); a 429 carries Retry-After (seconds, rounded
// up).
func throttledFront(rate, maxBurst int) front {
	return func() (http.Handler, func(), error) {
		store, err := memstore.NewCtx(65536)
		if err != nil {
			return nil, nil, err
		}
		quota := throttled.RateQuota{MaxRate: throttled.PerSec(rate), MaxBurst: maxBurst}
		rl, err := throttled.NewGCRARateLimiterCtx(store, quota)
		if err != nil {
			return nil, nil, err
		}
		h := throttled.HTTPRateLimiterCtx{RateLimiter: rl, VaryBy: &throttled.VaryBy{Path: true}}
		return h.RateLimit(okHandler), func() {}, nil
	}
}

// goLimiterFront is sethvargo/go-limiter as its README shows: a memorystore
// of tokens per interval behind httplimit.NewMiddleware keyed by IP. Each
// key's windows start at its first request and refill in full at every
// interval: a fixed window not aligned to the clock. Every answer carries
// X-RateLimit-Limit, -Remaining and -Reset, the reset as an HTTP-date
// (RFC 1123, whole seconds, truncated); a 429 carries the same date in
// Retry-After.
func goLimiterFront(tokens int, interval time.Duration) front {
	return func() (http.Handler, func(), error) {
		store, err := memorystore.New(&memorystore.Config{Tokens: uint64(tokens), Interval: interval})
		if err != nil {
			return nil, nil, err
		}
		mw, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
		if err != nil {
			return nil, nil, err
		}
		return mw.Handle(okHandler), func() { _ = store.Close(context.Background()) }, nil
	}
}

// ululeFront is ulule/limiter v3 as its README shows: a memory store
// behind the stdlib middleware, at limit per window ("48-S"), keyed by
// IP. A key's window starts at the first request after its last one
// ended, so its boundaries move with the client. Every answer carries
// X-RateLimit-Limit, -Remaining and -Reset, the reset as a Unix epoch
// second (truncated); a 429 carries no Retry-After.
func ululeFront(limit int, window time.Duration) front {
	return func() (http.Handler, func(), error) {
		rate := limiter.Rate{Period: window, Limit: int64(limit)}
		mw := stdlib.NewMiddleware(limiter.New(memory.NewStore(), rate))
		return mw.Handler(okHandler), func() {}, nil
	}
}

// tollboothFront is didip/tollbooth v7 as its README shows: a limiter of
// perSecond requests a second (NewLimiter(perSecond, nil): an x/time/rate
// token bucket, burst perSecond) behind LimitHandler, keyed by IP. Every
// answer carries IETF draft-03's RateLimit-Limit, -Remaining (whole tokens
// left) and -Reset, the reset always "1" whatever the bucket holds; a 429
// carries no Retry-After.
func tollboothFront(perSecond float64) front {
	return func() (http.Handler, func(), error) {
		lmt := tollbooth.NewLimiter(perSecond, nil)
		return tollbooth.LimitHandler(lmt, okHandler), func() {}, nil
	}
}

// spentBy puts another client in front of f's limiter, one egress cannot
// see: from the moment the limiter is built until it is released, it
// sends perSecond requests evenly, straight into the limiter's handler,
// from the same address and path as the bench's clients, so that they
// count against the same key.
func spentBy(f front, perSecond float64) front {
	return func() (http.Handler, func(), error) {
		h, release, err := f()
		if err != nil {
			return nil, nil, err
		}
		done := make(chan struct{})
		stopped := make(chan struct{})
		run := &otherRun{built: time.Now()}
		others.Lock()
		others.runs = append(others.runs, run)
		others.Unlock()
		go func() {
			defer close(stopped)
			tick := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					req := httptest.NewRequest(http.MethodGet, "/", nil)
					req.RemoteAddr = "127.0.0.1:1"
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code == http.StatusOK {
						others.Lock()
						run.admitted = append(run.admitted, time.Now())
						others.Unlock()
					}
				}
			}
		}()
		return h, func() { close(done); <-stopped; release() }, nil
	}
}

// otherShare is the part of the upstream's quota that the other client of
// the "spent by another client" rows tries to take: it sends that share of
// the limit, and what it is admitted is what it spent.
const otherShare = 0.2

// others records, for every front spentBy built, when its other client
// was admitted.
var others struct {
	sync.Mutex
	runs []*otherRun
}

type otherRun struct {
	built    time.Time
	admitted []time.Time
}

// otherAdmitted returns how many of the other client's requests the
// upstream admitted during r: those of the front built last before r
// started.
func otherAdmitted(r row) int {
	others.Lock()
	defer others.Unlock()
	var run *otherRun
	for _, o := range others.runs {
		if !o.built.After(r.start) && (run == nil || o.built.After(run.built)) {
			run = o
		}
	}
	if run == nil {
		return 0
	}
	n := 0
	for _, a := range run.admitted {
		if !a.Before(r.start) && a.Before(r.start.Add(r.wall)) {
			n++
		}
	}
	return n
}

// leftUsed is the part of what the other client left of the quota during
// r that r used: r's admitted requests over (limit per window × the
// windows of r's wall time − the other client's admitted requests).
func leftUsed(sc scenario, r row) float64 {
	left := float64(sc.limit.Limit)*r.wall.Seconds()/sc.limit.Window.Seconds() - float64(otherAdmitted(r))
	if left <= 0 {
		return 0
	}
	return float64(r.admitted) / left
}

// hiddenRunSeconds is how long a headerless row runs at its hidden rate:
// 10 s, or longer where the steady state after 5 s would hold fewer than
// 250 requests. The goal is 1% of refusals; at 10/s, 5 s of steady state
// is ~50 requests, where a single refusal reads 1.9%.
func hiddenRunSeconds(rate int) int {
	return max(10, 5+(250+rate-1)/rate)
}

// followScenarios are the rows of issue 13 and issue 11 item 12.
func followScenarios(smoke bool) []scenario {
	scale := func(full, small int) int {
		if smoke {
			return small
		}
		return full
	}
	const rate = 48
	n := scale(600, 60)
	tr := func(id string, f front) front {
		if path := os.Getenv("FOLLOW_TRACE"); path != "" { // development only
			return traced(f, id, path)
		}
		return f
	}
	real := []string{"egress (README)", "egress (25% too high)", "egress (WithRetry only)", "egress (adaptive)", "x/time/rate", "failsafe-go", "go-retryablehttp"}
	window := upstream.Config{Algorithm: upstream.SlidingLog, Rate: rate, Burst: rate, Limit: rate, Window: time.Second}
	scs := []scenario{
		{
			id: "5a", part: "5", table: tableFollow,
			title: fmt.Sprintf("Real upstream: go-chi/httprate, 48 per 1 s window (sliding-window counter), %d requests from 32 goroutines, starting 10 ms after one of its window boundaries", n),
			limit: window, front: tr("5a", httprateFront(rate, time.Second)), phase: 10 * time.Millisecond,
			shares: []int{n}, goroutines: 32, plot: plotPerBin,
			contenders: append(real[:1:1], append([]string{egressCounterRetry}, real[1:]...)...),
		},
		{
			id: "5b", part: "5", table: tableFollow,
			title: fmt.Sprintf("Real upstream: throttled/throttled v2, GCRA 48/s with MaxBurst 8 (9 at once), %d requests from 32 goroutines", n),
			limit: upstream.Config{Rate: rate, Burst: 9}, front: tr("5b", throttledFront(rate, 8)),
			shares: []int{n}, goroutines: 32, plot: plotPerBin, contenders: append(real[:2:2], append([]string{egressBurstOne}, real[2:]...)...),
		},
		{
			id: "5c", part: "5", table: tableFollow,
			title: fmt.Sprintf("Real upstream: sethvargo/go-limiter, 48 tokens per 1 s interval (a fixed window from the first request; reset as an HTTP-date), %d requests from 32 goroutines", n),
			limit: window, front: tr("5c", goLimiterFront(rate, time.Second)),
			shares: []int{n}, goroutines: 32, plot: plotPerBin, contenders: real,
		},
		{
			id: "5f", part: "5", table: tableFollow,
			title: fmt.Sprintf("Real upstream: ulule/limiter v3, 48 per 1 s period (a fixed window from the first request after the last one ended; reset as an epoch second, no Retry-After), %d requests from 32 goroutines", n),
			limit: window, front: tr("5f", ululeFront(rate, time.Second)),
			shares: []int{n}, goroutines: 32, plot: plotPerBin, contenders: real,
		},
		{
			id: "5g", part: "5", table: tableFollow,
			title: fmt.Sprintf("Real upstream: didip/tollbooth v7, a token bucket of 48/s and burst 48 (IETF draft-03 RateLimit-* fields, the reset always \"1\"; no Retry-After), %d requests from 32 goroutines", n),
			limit: upstream.Config{Rate: rate, Burst: rate}, front: tr("5g", tollboothFront(rate)),
			shares: []int{n}, goroutines: 32, plot: plotPerBin, contenders: real,
		},
	}
	spent := []string{"egress (README)", "egress (adaptive)", "x/time/rate", "failsafe-go"}
	scs = append(scs,
		scenario{
			id: "5d", part: "5", table: tableFollow,
			title: fmt.Sprintf("Real upstream with 20%% of its quota spent by another client egress cannot see: go-chi/httprate as in 5a, another client sending %.1f/s into it; %d requests from 32 goroutines", otherShare*rate, n),
			limit: window, front: spentBy(tr("5d", httprateFront(rate, time.Second)), otherShare*rate), phase: 10 * time.Millisecond,
			shares: []int{n}, goroutines: 32, plot: plotPerBin, contenders: spent,
		},
		scenario{
			id: "5e", part: "5", table: tableFollow,
			title: fmt.Sprintf("Real upstream with 20%% of its quota spent by another client egress cannot see: sethvargo/go-limiter as in 5c, another client sending %.1f/s into it; %d requests from 32 goroutines", otherShare*rate, n),
			limit: window, front: spentBy(tr("5e", goLimiterFront(rate, time.Second)), otherShare*rate),
			shares: []int{n}, goroutines: 32, plot: plotPerBin, contenders: spent,
		},
	)
	hidden := []string{"egress (WithRetry only)", "egress (adaptive)", "go-retryablehttp", "failsafe-go (retry only)", "naive"}
	for i, h := range []struct {
		rate, status int
	}{{10, http.StatusTooManyRequests}, {100, http.StatusServiceUnavailable}, {1000, http.StatusTooManyRequests}} {
		secs := scale(hiddenRunSeconds(h.rate), 2)
		burst := max(h.rate/10, 1)
		scs = append(scs, scenario{
			id: "6" + string(rune('a'+i)), part: "6", table: tableHidden,
			title: fmt.Sprintf("Headerless upstream, hidden limit %d/s (token bucket, burst %d), answering a bare %d: no Retry-After, no quota headers; %d requests from 32 goroutines",
				h.rate, burst, h.status, secs*h.rate),
			limit:  upstream.Config{Rate: h.rate, Burst: burst, Status: h.status, NoRetryAfter: true, Headers: upstream.NoHeaders},
			shares: []int{secs * h.rate}, goroutines: 32, plot: plotPerBin, contenders: hidden,
		})
	}
	// The same upstreams, learned by 4 processes through one Redis: 8
	// goroutines each, the same work in all.
	for i, h := range []struct {
		rate, status int
	}{{10, http.StatusTooManyRequests}, {100, http.StatusServiceUnavailable}, {1000, http.StatusTooManyRequests}} {
		secs := scale(hiddenRunSeconds(h.rate), 2)
		burst := max(h.rate/10, 1)
		share := secs * h.rate / 4
		scs = append(scs, scenario{
			id: "6" + string(rune('d'+i)), part: "6", table: tableHidden,
			title: fmt.Sprintf("Headerless upstream as in 6%c (hidden limit %d/s, burst %d, a bare %d), learned by 4 processes through one Redis; %d requests from 4 × 8 goroutines",
				'a'+i, h.rate, burst, h.status, 4*share),
			limit:  upstream.Config{Rate: h.rate, Burst: burst, Status: h.status, NoRetryAfter: true, Headers: upstream.NoHeaders},
			shares: []int{share, share, share, share}, goroutines: 8, redis: true, plot: plotPerBin, contenders: []string{adaptiveRedis},
		})
	}
	scs = append(scs, scenario{
		id: "7", part: "7", table: tableFollow,
		title:  fmt.Sprintf("nginx-like leaky bucket upstream (limit_req rate=48r/s burst=8 nodelay, limit_req_status 429: 9 at once, excess refused with a bare 429, no Retry-After, as nginx sends it), %d requests from 32 goroutines", n),
		limit:  upstream.Config{Algorithm: upstream.LeakyBucket, Rate: rate, Burst: 8, NoRetryAfter: true, Headers: upstream.NoHeaders},
		shares: []int{n}, goroutines: 32, plot: plotPerBin,
		contenders: []string{"egress (README)", "x/time/rate", "failsafe-go"},
	})
	if only := os.Getenv("FOLLOW_CONTENDERS"); only != "" { // development only: names split at ";" if there is one (some hold commas), else at ","
		sep := ","
		if strings.Contains(only, ";") {
			sep = ";"
		}
		for i := range scs {
			scs[i].contenders = strings.Split(only, sep)
		}
	}
	if !smoke {
		return scs
	}
	// The smoke run builds every contender once and every upstream once,
	// and no more: CI runs it.
	var out []scenario
	for _, sc := range scs {
		switch sc.id {
		case "5b", "5c", "5d", "5g", "7":
			sc.contenders = sc.contenders[:1]
		case "6a", "6c", "6d", "6f", "5e":
			continue
		}
		out = append(out, sc)
	}
	return out
}

// best is the least wall time any client can need for n requests against
// sc's upstream: a greedy client that sends whenever the upstream's own
// algorithm would admit, simulated at 100 µs steps for the windowed
// upstreams.
func best(sc scenario, n int) time.Duration {
	l := sc.limit
	switch {
	case sc.id == "5d" || sc.id == "5e":
		// What is left, used evenly after a first window's worth.
		left := (1 - otherShare) * float64(l.Limit)
		return time.Duration((float64(n) - left) / left * float64(l.Window))
	case sc.id == "5a":
		return slidingCounterBest(n, l.Limit, l.Window, sc.phase)
	case sc.id == "5c" || sc.id == "5f":
		// A fixed window's worth at each boundary (ulule's windows start
		// at a request: a greedy client's next one opens the next window
		// at the end of the last).
		return time.Duration(math.Ceil(float64(n)/float64(l.Limit))-1) * l.Window
	case l.Algorithm == upstream.LeakyBucket:
		return time.Duration(float64(n-l.Burst-1) / float64(l.Rate) * float64(time.Second))
	}
	return time.Duration(float64(n-l.Burst) / float64(l.Rate) * float64(time.Second))
}

// slidingCounterBest simulates httprate's sliding-window counter for a
// client that starts phase after a window boundary and sends each request
// as soon as it would be admitted, and returns when the n-th is admitted.
// httprate admits when round(prev·(w−elapsed)/w + curr) + 1 ≤ limit.
func slidingCounterBest(n, limit int, w, phase time.Duration) time.Duration {
	const step = 100 * time.Microsecond
	prev, curr, sent := 0, 0, 0
	win := time.Duration(0) // start of the current window, relative to the boundary before the start
	for t := phase; ; t += step {
		if t-win >= w {
			prev, curr = curr, 0
			if t-win >= 2*w {
				prev = 0
			}
			win = t - (t-win)%w
		}
		elapsed := t - win
		for sent < n {
			r := float64(prev)*float64(w-elapsed)/float64(w) + float64(curr)
			if int(math.Round(r))+1 > limit {
				break
			}
			curr++
			sent++
		}
		if sent == n {
			return t - phase
		}
	}
}

// hiddenStats are the headerless scenario's steady-state measures: from
// settle after the start to the end of the run.
type hiddenStats struct {
	settle time.Duration
	// ran says whether the run lasted past settle; the rates are 0 when
	// it did not.
	ran             bool
	sentPerSec      float64 // attempts that reached the upstream, per second
	admittedPerSec  float64
	refusedFraction float64 // of those attempts
}

// steady measures r after settle: 5 s, or half the minimum wall time when
// that is shorter.
func steady(sc scenario, r row) hiddenStats {
	settle := min(5*time.Second, sc.minimum()/2)
	hs := hiddenStats{settle: settle}
	from, to := r.start.Add(settle), r.start.Add(r.wall)
	span := to.Sub(from).Seconds()
	if span <= 0 {
		return hs
	}
	hs.ran = true
	var admitted, all int
	for _, a := range r.arrivals {
		if !a.Before(from) && a.Before(to) {
			admitted++
		}
	}
	for _, a := range r.allArrivals {
		if !a.Before(from) && a.Before(to) {
			all++
		}
	}
	hs.sentPerSec, hs.admittedPerSec = float64(all)/span, float64(admitted)/span
	if all > 0 {
		hs.refusedFraction = float64(all-admitted) / float64(all)
	}
	return hs
}

// converged returns when the learned rate entered ±10% of the hidden
// limit and stayed there to the end of the run; false when it never did,
// or there are no samples.
func converged(learned []float64, limit float64) (time.Duration, bool) {
	if len(learned) == 0 {
		return 0, false
	}
	i := len(learned)
	for i > 0 && math.Abs(learned[i-1]-limit) <= 0.1*limit {
		i--
	}
	if i == len(learned) {
		return 0, false
	}
	return time.Duration(i) * bin, true
}

// admittedConverged returns when what the upstream admitted, counted over
// the trailing second, entered ±10% of the hidden limit and stayed there
// until the last second of the run (which the last requests leave
// partly empty); false when it never did.
func admittedConverged(r row, limit float64) (time.Duration, bool) {
	end := r.wall - time.Second
	if end <= time.Second {
		return 0, false
	}
	at := time.Duration(-1)
	lo := 0
	hi := 0
	for t := time.Second; t <= end; t += 10 * time.Millisecond {
		now := r.start.Add(t)
		for hi < len(r.arrivals) && !r.arrivals[hi].After(now) {
			hi++
		}
		for lo < hi && now.Sub(r.arrivals[lo]) >= time.Second {
			lo++
		}
		if math.Abs(float64(hi-lo)-limit) <= 0.1*limit {
			if at < 0 {
				at = t
			}
		} else {
			at = -1
		}
	}
	return at, at >= 0
}

// fmtConverged formats a convergence time.
func fmtConverged(d time.Duration, ok bool) string {
	if !ok {
		return "never"
	}
	return fmtSec(d)
}

// writeFollowSection writes a scenario of issue 13 or issue 11 item 12.
func (r *report) writeFollowSection(p func(string, ...any), s section) {
	sc := s.sc
	p("## Scenario %s. %s\n\n", sc.id, sc.title)
	p("Minimum wall time: %s (a greedy client against the upstream's own algorithm).\n\n", fmtSec(sc.minimum()))
	hidden := sc.table == tableHidden
	if hidden {
		p("| contender | wall | ÷ minimum | refusals | ok / failed | utilization | after %s: reached the upstream /s ÷ hidden limit | admitted /s ÷ hidden limit | refused, of what reached it | admitted in the trailing 1 s within ±10%% from | learned rate within ±10%% from | client CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
			fmtSec(steady(sc, row{}).settle))
	} else {
		p("| contender | wall | ÷ minimum | 429s | 429s, of requests | sent in a pause | ok / failed | client CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	}
	for _, row := range s.rows {
		if row.skipped != "" {
			p("| %s | skipped: %s |\n", row.contender, row.skipped)
			continue
		}
		ratio := row.wall.Seconds() / sc.minimum().Seconds()
		if hidden {
			hs := steady(sc, row)
			lim := float64(sc.limit.Rate)
			sent, admitted, refused := "ended before", "—", "—"
			if hs.ran {
				sent, admitted, refused = fmt.Sprintf("%.2f", hs.sentPerSec/lim), fmt.Sprintf("%.2f", hs.admittedPerSec/lim), fmt.Sprintf("%.1f%%", 100*hs.refusedFraction)
			}
			learned := "—"
			if len(row.learned) > 0 {
				learned = fmtConverged(converged(row.learned, lim))
			}
			p("| %s | %s | %.2f | %d | %d / %d | %s | %s | %s | %s | %s | %s | %s |\n", row.contender, fmtSec(row.wall), ratio, row.refused, row.ok, row.failed,
				fmtPct(utilization(sc, row)), sent, admitted, refused, fmtConverged(admittedConverged(row, lim)), learned, fmtCPU(row.cpu))
			continue
		}
		p("| %s | %s | %.2f | %d | %.1f%% | %d | %d / %d | %s |\n", row.contender, fmtSec(row.wall), ratio, row.refused,
			100*float64(row.refused)/float64(sc.requests()), row.duringPause, row.ok, row.failed, fmtCPU(row.cpu))
	}
	p("\n")
	if sc.id == "5d" || sc.id == "5e" {
		p("What the other client was admitted during each run, and the part of what it left (limit per window × wall − its admitted) that each contender used:\n\n")
		for _, row := range s.rows {
			if row.skipped == "" {
				p("- **%s**: other client admitted %d; %.0f%% of what it left used\n", row.contender, otherAdmitted(row), 100*leftUsed(sc, row))
			}
		}
		p("\n")
	}
	if hidden && sc.redis {
		for _, row := range s.rows {
			if row.skipped == "" && row.admitted+row.refused > 0 {
				attempts := float64(row.admitted + row.refused)
				p("- **%s**: %.3f Redis scripts per request that reached the upstream (%d scripts from INFO commandstats for %d requests, retries included), %.3f per logical request; %.3f commands per request that reached the upstream counting every command and pipeline the clients sent (a go-redis hook: connection handshakes and the pause subscriptions included). The learned rate plotted is the first process's view of the fleet's rate, which every reply updates.\n", row.contender,
					float64(row.scripts())/attempts, row.scripts(), row.admitted+row.refused, float64(row.scripts())/float64(sc.requests()), float64(row.roundTrips)/attempts)
			}
		}
		p("\n")
	}
	if hidden {
		p("The steady-state columns count from %s after the start (5 s, or half the minimum when that is shorter) to the end of each run. Utilization is admitted ÷ (burst + hidden rate × wall).\n\n", fmtSec(steady(sc, row{}).settle))
	}
	if sc.plot != plotNone {
		p("![scenario %s](%s)\n\n", sc.id, plotFile(sc))
		if len(learnedRows(s.rows)) > 0 {
			p("![scenario %s, learned rate](%s)\n\n", sc.id, learnedPlotFile(sc))
		}
	}
	p("How each contender was configured:\n\n")
	for _, row := range s.rows {
		p("- **%s**: %s\n", row.contender, followConfiguration(sc, row.contender))
	}
	p("\n")
	if st := notBest(sc, s.rows); len(st) > 0 {
		p("Where egress is not best:\n\n")
		for _, s := range st {
			p("- %s\n", s)
		}
		p("\n")
	}
}

// followConfiguration says how a contender was set up in a scenario of
// issue 13 or issue 11 item 12.
func followConfiguration(sc scenario, name string) string {
	l := sc.limit
	tol := "throttle.WithTolerance(throttle.DefaultTolerance)"
	readme := func(rate, limit int) string {
		switch l.Algorithm {
		case upstream.LeakyBucket:
			return fmt.Sprintf("`throttle.NewLeakyBucket(throttle.PerSecond(%d), %d, %s)`", rate, l.Burst, tol)
		case upstream.SlidingLog, upstream.FixedWindow:
			return fmt.Sprintf("`throttle.NewSlidingWindow(%d, %v, %s)`", limit, l.Window, tol)
		}
		return fmt.Sprintf("`throttle.NewTokenBucket(throttle.PerSecond(%d), %d, %s)`", rate, l.Burst, tol)
	}
	retry := " and `egress.WithRetry(retryafter.Policy{})` (the defaults)"
	switch name {
	case "egress (README)":
		return "`egress.NewTransport` with " + readme(l.Rate, l.Limit) + retry + ": the README's pick for this upstream's published limit."
	case "egress (25% too high)":
		return "as egress (README), configured 25% above the published limit: " + readme(l.Rate*5/4, l.Limit*5/4) + "."
	case egressBurstOne:
		return fmt.Sprintf("`egress.NewTransport(base, egress.WithLimiter(throttle.NewTokenBucket(throttle.PerSecond(%d), 1, %s)), egress.WithRetry(retryafter.Policy{}))`: a token bucket of burst 1 at the published rate (issue 13: the tolerance costs the most where there is the least to spare).", l.Rate, tol)
	case egressCounterRetry:
		return fmt.Sprintf("`throttle.NewSlidingWindowCounter(%d, %v, %s)`", l.Limit, l.Window, tol) + retry + ": the algorithm httprate documents."
	case "egress (WithRetry only)":
		return "`egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))`: no limiter, so only what the upstream answers shapes the pace."
	case "x/time/rate":
		return fmt.Sprintf("`rate.NewLimiter(%d, %d)`, `Wait(ctx)` before each attempt; on a 429, sleep the Retry-After (whole seconds; 1 s when it is missing or not a number) and go again.", l.Rate, l.Burst)
	case "failsafe-go":
		return fmt.Sprintf("`failsafehttp.NewRoundTripper(base, retryPolicy, rateLimiter)`: `failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(10)` around `ratelimiter.NewSmoothBuilder(%d, time.Second).WithMaxWaitTime(time.Minute)`.", l.Rate)
	case "egress (adaptive)":
		return "`egress.NewTransport(base, egress.WithLimiter(throttle.NewAdaptive(throttle.PerSecond(1000))), egress.WithRetry(retryafter.Policy{}))`: the recipe for \"I do not know the limit\", a ceiling of 1 000/s."
	case adaptiveRedis:
		return "in each of the 4 processes, `egress.NewTransport(base, egress.WithLimiter(redislimit.NewAdaptive(rdb, throttle.PerSecond(1000))), egress.WithUpstream(throttle.NewUpstream()), egress.WithRetry(retryafter.Policy{}))`: the recipe for \"I do not know the limit\" with the learned rate in Redis, shared by the fleet."
	case "failsafe-go (retry only)":
		return "`failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(10).Build())`: no limiter (the limit is unknown); its retry policy retries 429 and 5xx with its default delay."
	}
	return configuration(name)
}

// followGoals checks the goals of issue 13 and issue 11 item 12 against
// one scenario's rows.
func followGoals(sc scenario, rows []row) []goal {
	find := func(name string) (row, bool) {
		for _, r := range rows {
			if r.contender == name && r.skipped == "" {
				return r, true
			}
		}
		return row{}, false
	}
	n := float64(sc.requests())
	var gs []goal
	add := func(issue, what string, met bool, format string, args ...any) {
		gs = append(gs, goal{issue: issue, what: fmt.Sprintf("scenario %s: %s", sc.id, what), measured: fmt.Sprintf(format, args...), met: met, known: true})
	}
	switch sc.table {
	case tableHidden:
		// The recipe for "I do not know the limit" is the adaptive; the
		// WithRetry-only row shows what a Transport without a limiter
		// does, for comparison, and is not judged.
		names := []string{"egress (adaptive)"}
		if sc.redis {
			names = []string{adaptiveRedis}
			if r, ok := find(adaptiveRedis); ok {
				attempts := float64(r.admitted + r.refused)
				perAttempt := float64(r.scripts()) / attempts
				add("13", "4 processes through Redis, limit unknown: 1.00 Redis round trips per request", perAttempt < 1.005,
					"%.3f scripts per request that reached the upstream (%.3f per logical request); %.3f commands per request counting connection handshakes and subscriptions",
					perAttempt, float64(r.scripts())/n, float64(r.roundTrips)/attempts)
			}
		}
		for _, name := range names {
			r, ok := find(name)
			if !ok {
				continue
			}
			hs := steady(sc, r)
			u := hs.admittedPerSec / float64(sc.limit.Rate)
			what := "no limit configured, no headers, " + name + ": steady-state refusals ≤ 1%, utilization ≥ 90%"
			if !hs.ran {
				add("13", what, false, "the run ended at %s, before the steady state, with %d of %d failed", fmtSec(r.wall), r.failed, sc.requests())
				continue
			}
			add("13", what, hs.refusedFraction <= 0.01 && u >= 0.9 && r.failed == 0,
				"%.1f%% refused, %.0f%% of the hidden limit admitted, %d of %d failed", 100*hs.refusedFraction, 100*u, r.failed, sc.requests())
			if len(r.learned) > 0 {
				at, ok := converged(r.learned, float64(sc.limit.Rate))
				add("13", "no limit configured, no headers, "+name+": learned rate within ±10% of the hidden limit in ≤ 5 s (and staying there)",
					ok && at <= 5*time.Second, "from %s; %d refusals over the whole run, learning included", fmtConverged(at, ok), r.refused)
			}
		}
	case tableFollow:
		readme, ok := find("egress (README)")
		if !ok {
			return nil
		}
		ratio := readme.wall.Seconds() / sc.minimum().Seconds()
		if sc.part == "7" {
			add("11", "leaky bucket, README recipe: 0 failures, 0 429s, ≤ 1.01× the minimum wall time", readme.failed == 0 && readme.refused == 0 && ratio <= 1.01,
				"%d failed, %d 429s, %.3f×", readme.failed, readme.refused, ratio)
			return gs
		}
		if sc.id == "5d" || sc.id == "5e" {
			for _, name := range []string{"egress (README)", "egress (adaptive)"} {
				r, ok := find(name)
				if !ok {
					continue
				}
				u := leftUsed(sc, r)
				add("13", "20% of the quota spent by another client, "+name+": 429s ≤ 0.5% of requests, ≥ 95% of what is left used",
					float64(r.refused) <= 0.005*n && u >= 0.95 && r.failed == 0,
					"%d 429s (%.1f%%), %.0f%% of what the other client left used (it was admitted %d), %d failed", r.refused, 100*float64(r.refused)/n, 100*u, otherAdmitted(r), r.failed)
			}
			return gs
		}
		bestPeer, peer := math.Inf(1), "none ran"
		for _, r := range rows {
			if r.skipped == "" && !strings.HasPrefix(r.contender, "egress") && r.failed == 0 && r.wall.Seconds() < bestPeer {
				bestPeer, peer = r.wall.Seconds(), r.contender
			}
		}
		add("13", "published limit: wall ≤ the best peer's and ≤ 1.05× the minimum; 429s ≤ 0.5% of requests",
			readme.wall.Seconds() <= bestPeer && ratio <= 1.05 && float64(readme.refused) <= 0.005*n && readme.failed == 0,
			"%.2f× the minimum (best peer without failures: %s, %.2f×); %d 429s (%.1f%%), %d failed", ratio, peer, bestPeer/sc.minimum().Seconds(),
			readme.refused, 100*float64(readme.refused)/n, readme.failed)
		if math.IsInf(bestPeer, 1) {
			gs[len(gs)-1].known = false // no peer ran (FOLLOW_CONTENDERS): not met against no one
		}
		if high, ok := find("egress (25% too high)"); ok {
			add("13", "configured 25% too high: 429s ≤ 1% of requests, wall ≤ 1.10× the published-limit run",
				float64(high.refused) <= 0.01*n && high.wall.Seconds() <= 1.1*readme.wall.Seconds() && high.failed == 0,
				"%d 429s (%.1f%%), %.2f× the published-limit run, %d failed", high.refused, 100*float64(high.refused)/n, high.wall.Seconds()/readme.wall.Seconds(), high.failed)
		}
		if only, ok := find("egress (adaptive)"); ok {
			u := float64(only.admitted) / n / (only.wall.Seconds() / sc.minimum().Seconds())
			add("13", "no limit configured, headers present (the recipe \"I do not know the limit\"): 429s ≤ 1%, utilization ≥ 90%",
				float64(only.refused) <= 0.01*n && u >= 0.9 && only.failed == 0,
				"%d 429s (%.1f%%), utilization %.0f%% (minimum ÷ wall), %d failed", only.refused, 100*float64(only.refused)/n, 100*u, only.failed)
		}
	}
	return gs
}

// traced logs every request f's limiter answers to the file at path, for
// finding where 429s fall against the upstream's windows (development
// only, FOLLOW_TRACE): the scenario, the front's build, the Unix time of
// arrival in ns, its offset from the build, who sent it, the status and
// the quota headers.
func traced(f front, id, path string) front {
	return func() (http.Handler, func(), error) {
		h, release, err := f()
		if err != nil {
			return nil, nil, err
		}
		file, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			release()
			return nil, nil, err
		}
		built := time.Now()
		var mu sync.Mutex
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				at := time.Now()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				who := "egress"
				if r.RemoteAddr == "127.0.0.1:1" {
					who = "other"
				}
				mu.Lock()
				fmt.Fprintf(file, "%s %d %d %d %s %d %s %s\n", id, built.UnixNano(), at.UnixNano(), at.Sub(built).Nanoseconds(), who,
					rec.Code, rec.Header().Get("X-RateLimit-Remaining"), strings.ReplaceAll(rec.Header().Get("X-RateLimit-Reset"), " ", "_"))
				mu.Unlock()
			}), func() {
				release()
				_ = file.Close()
			}, nil
	}
}

// egressBurstOne is the contender of issue 13's third point: a token
// bucket of burst 1 at the published rate, with the recommended
// tolerance and the default retry, where a constant tolerance would
// lengthen every interval.
const egressBurstOne = "egress (burst 1)"
