// Package upstream is the strict test API that the programs under
// examples/ and the scenarios of bench/ run against: an httptest server
// on loopback that enforces its published limit exactly, measured when
// each request arrives, refuses beyond it, and records what it saw.
//
// It can enforce one of four algorithms ([Algorithm]), an optional quota
// per "day", and a scripted pause; it can describe its state in
// X-RateLimit-* or IETF RateLimit headers, or send none; and it refuses
// with 429 (or 503) and Retry-After, or with the bare status.
package upstream

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/egress-go/egress/internal/sendtime"
)

// Algorithm is how the API counts its rate limit.
type Algorithm int

const (
	// TokenBucket is a strict GCRA of Rate per second with bursts of
	// Burst: Burst requests at once, then one every 1/Rate.
	TokenBucket Algorithm = iota
	// LeakyBucket is nginx's limit_req with burst=Burst and nodelay: 1 +
	// Burst requests at once, then one every 1/Rate, every excess request
	// refused at once (not queued). It counts as nginx does, in whole
	// milliseconds and thousandths of a request.
	LeakyBucket
	// SlidingLog admits at most Limit requests in any interval of length
	// Window.
	SlidingLog
	// FixedWindow admits at most Limit requests per Window, the windows
	// starting when the server does.
	FixedWindow
)

// Headers is which quota headers the API sends with every answer.
type Headers int

const (
	// QuotaHeaders, the zero value, sends X-RateLimit-Limit, -Remaining
	// and -Reset (whole seconds until the reset) for the daily Quota when
	// one is set, and nothing otherwise.
	QuotaHeaders Headers = iota
	// NoHeaders sends no quota headers.
	NoHeaders
	// XRateLimitHeaders sends X-RateLimit-Limit, -Remaining and -Reset
	// (whole seconds until the budget is full again) for the rate limit.
	XRateLimitHeaders
	// IETFHeaders sends the IETF RateLimit-Policy and RateLimit fields
	// (draft-ietf-httpapi-ratelimit-headers) for the rate limit.
	IETFHeaders
)

// Config is the API's published limit and how it answers.
type Config struct {
	// Algorithm selects how Rate and Burst, or Limit and Window, count.
	Algorithm Algorithm
	// Rate units per second, with bursts of Burst (TokenBucket) or 1 +
	// Burst (LeakyBucket).
	Rate  int
	Burst int
	// Limit units per Window (SlidingLog, FixedWindow).
	Limit  int
	Window time.Duration

	// Quota units per Day, when Quota is above 0: a fixed window that
	// starts when the server does and resets every Day.
	Quota int
	Day   time.Duration

	// Cost returns how many units a request spends. nil means 1.
	Cost func(*http.Request) int

	// ThrottleAt, when above 0, makes the API answer the ThrottleAt-th
	// request it would have admitted with a refusal and Retry-After:
	// ThrottleFor (whole seconds), and refuse everything until then.
	ThrottleAt  int
	ThrottleFor time.Duration

	// Status is the status of a refusal: 0 means 429; 503 is the other
	// one APIs use.
	Status int
	// NoRetryAfter leaves Retry-After out of refusals.
	NoRetryAfter bool
	// Headers is which quota headers every answer carries.
	Headers Headers

	// Front, when set, decides instead of everything above: a limiter
	// middleware (a third-party one, used as its docs show) around a
	// handler that answers 200. The Server records what it answered: a
	// 2xx as admitted, anything else as refused, with the Retry-After it
	// sent (whole seconds or an HTTP-date) as the length of the refusal.
	Front http.Handler
}

// Arrival is one request the API received.
type Arrival struct {
	At     time.Time // when it arrived
	SentAt time.Time // when the client sent it, if it was stamped
	Status int       // the status the API answered
}

// Stats is what the API saw since it started or was Reset.
type Stats struct {
	// Admitted counts 2xx answers, Refused refusals.
	Admitted, Refused int
	// DuringPause counts requests sent after a refusal had left the
	// server and received before the Retry-After it carried had run out.
	DuringPause int
	// Arrivals holds the arrival time of every admitted request, and
	// Refusals that of every refused one, in the order they were decided
	// (with Front, the order its answers came, which may differ from the
	// order of arrival by the time a decision takes).
	Arrivals, Refusals []time.Time
}

// Server is a strict API. It is safe for concurrent use.
type Server struct {
	srv *httptest.Server
	// now reads the clock; tests in this package replace it.
	now func() time.Time

	// mu guards the fields below. It is held only for bookkeeping, never
	// while writing a response.
	mu    sync.Mutex
	cfg   Config
	start time.Time
	// tat is the token bucket's theoretical arrival time (GCRA).
	tat time.Time
	// excess (thousandths of a request) and lastMs (Unix milliseconds)
	// are nginx's leaky bucket state.
	excess, lastMs int64
	// window and inWindow are the fixed window's index and count.
	window, inWindow int64
	// day and spent are the quota's day index and units spent in it.
	day         int64
	spent       int
	wouldAdmit  int // requests admitted or throttled by ThrottleAt
	pausedUntil time.Time
	// lastLeft is when the latest refusal left the server; announced is
	// the latest time until which the API has said it refuses.
	lastLeft, announced time.Time
	arrivals            []Arrival
	stats               Stats
}

// New starts the API on the loopback interface, speaking HTTP/1.1. Close
// it when done.
func New(cfg Config) *Server {
	s := &Server{now: time.Now}
	s.Reset(cfg)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the API's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Start is when the API's first day (and first fixed window) began: when
// it started or was last Reset.
func (s *Server) Start() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start
}

// Close shuts the API down.
func (s *Server) Close() { s.srv.Close() }

// Reset forgets everything seen and enforces cfg from now on.
func (s *Server) Reset(cfg Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg, s.start = cfg, s.now()
	s.tat, s.excess, s.lastMs = time.Time{}, 0, 0
	s.window, s.inWindow, s.day, s.spent, s.wouldAdmit = 0, 0, 0, 0, 0
	s.pausedUntil, s.lastLeft, s.announced = time.Time{}, time.Time{}, time.Time{}
	s.arrivals, s.stats = nil, Stats{}
}

// config returns the Config in force.
func (s *Server) config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Arrivals returns every request the API has received, in order.
func (s *Server) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.arrivals...)
}

// TooMany returns how many refusals the API has sent.
func (s *Server) TooMany() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.Refused
}

// Stats returns a copy of what the API has seen.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Arrivals = append([]time.Time(nil), s.stats.Arrivals...)
	st.Refusals = append([]time.Time(nil), s.stats.Refusals...)
	return st
}

// verdict is the API's answer to one request.
type verdict struct {
	ok   bool
	wait time.Duration // how long to wait, when refused
	// limit, remaining and reset describe the budget the headers report;
	// limit is -1 when there is nothing to report.
	limit, remaining int
	reset            time.Duration
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	cfg := s.config()
	if cfg.Front != nil {
		s.serveFront(w, r, cfg.Front)
		return
	}
	cost := 1
	if cfg.Cost != nil {
		cost = cfg.Cost(r)
	}
	v, cfg := s.admit(sendtime.Of(r), cost) // the Config the decision was made under
	h := w.Header()
	if v.limit >= 0 {
		switch cfg.Headers {
		case QuotaHeaders, XRateLimitHeaders:
			h.Set("X-RateLimit-Limit", strconv.Itoa(v.limit))
			h.Set("X-RateLimit-Remaining", strconv.Itoa(v.remaining))
			h.Set("X-RateLimit-Reset", strconv.Itoa(seconds(v.reset)))
		case IETFHeaders:
			h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, v.limit, policyWindow(cfg)))
			h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, v.remaining, seconds(v.reset)))
		}
	}
	if v.ok {
		_, _ = w.Write([]byte("ok"))
		return
	}
	if !cfg.NoRetryAfter {
		h.Set("Retry-After", strconv.Itoa(seconds(v.wait)))
	}
	w.WriteHeader(refusal(cfg))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	s.left(v.wait)
}

// serveFront passes r to front and records its answer.
func (s *Server) serveFront(w http.ResponseWriter, r *http.Request, front http.Handler) {
	sentAt := sendtime.Of(r)
	s.mu.Lock()
	now := s.now()
	s.countDuringPause(now, sentAt)
	s.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	front.ServeHTTP(sw, r)
	s.mu.Lock()
	if sw.status/100 == 2 {
		s.stats.Admitted++
		s.stats.Arrivals = append(s.stats.Arrivals, now)
	} else {
		s.stats.Refused++
		s.stats.Refusals = append(s.stats.Refusals, now)
	}
	s.arrivals = append(s.arrivals, Arrival{At: now, SentAt: sentAt, Status: sw.status})
	s.mu.Unlock()
	if sw.status/100 != 2 {
		wait, _ := retryAfter(sw.Header().Get("Retry-After"), s.now())
		s.left(wait)
	}
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// retryAfter reads a Retry-After value: whole seconds or an HTTP-date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// refusal is the status cfg refuses with.
func refusal(cfg Config) int {
	if cfg.Status == 0 {
		return http.StatusTooManyRequests
	}
	return cfg.Status
}

// policyWindow is the window, in whole seconds, that RateLimit-Policy
// states for cfg's rate limit.
func policyWindow(cfg Config) int {
	switch cfg.Algorithm {
	case SlidingLog, FixedWindow:
		return seconds(cfg.Window)
	}
	return 1
}

// admit decides a request of cost units, sent at sentAt, arriving now.
// It returns the verdict and the Config it was made under.
func (s *Server) admit(sentAt time.Time, cost int) (verdict, Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cfg := s.cfg
	s.countDuringPause(now, sentAt)
	v := s.decide(now, cost)
	status := http.StatusOK
	if v.ok {
		s.stats.Admitted++
		s.stats.Arrivals = append(s.stats.Arrivals, now)
	} else {
		status = refusal(cfg)
		s.stats.Refused++
		s.stats.Refusals = append(s.stats.Refusals, now)
	}
	s.arrivals = append(s.arrivals, Arrival{At: now, SentAt: sentAt, Status: status})
	return v, cfg
}

// countDuringPause counts a request sent at sentAt, arriving at now, if
// it was sent after the latest refusal had left the server and arrived
// before that refusal's Retry-After ran out. s.mu is held.
func (s *Server) countDuringPause(now, sentAt time.Time) {
	if !sentAt.IsZero() && sentAt.After(s.lastLeft) && now.Before(s.announced) {
		s.stats.DuringPause++
	}
}

// decide applies the quota, the pause and the rate limit, in that order.
// s.mu is held.
func (s *Server) decide(now time.Time, cost int) verdict {
	cfg := s.cfg
	quota := verdict{limit: -1}
	if cfg.Quota > 0 {
		if day := int64(now.Sub(s.start) / cfg.Day); day != s.day {
			s.day, s.spent = day, 0
		}
		reset := s.start.Add(time.Duration(s.day+1) * cfg.Day).Sub(now)
		quota = verdict{limit: cfg.Quota, remaining: cfg.Quota - s.spent, reset: reset, wait: reset}
		if cost > quota.remaining {
			return quota
		}
	}
	if now.Before(s.pausedUntil) {
		v := quota
		v.wait = s.pausedUntil.Sub(now)
		return v
	}
	v := s.rate(now, cost, false)
	if v.ok {
		if s.wouldAdmit++; s.wouldAdmit == cfg.ThrottleAt {
			s.pausedUntil = now.Add(cfg.ThrottleFor)
			v = quota
			v.wait = cfg.ThrottleFor
			return v
		}
		v = s.rate(now, cost, true)
		if cfg.Quota > 0 {
			s.spent += cost
			quota.remaining -= cost
		}
	}
	if cfg.Headers == QuotaHeaders {
		quota.ok, quota.wait = v.ok, v.wait
		return quota
	}
	return v
}

// rate decides cost units against the rate limit at now, and books them
// when book is set and they fit. s.mu is held.
func (s *Server) rate(now time.Time, cost int, book bool) verdict {
	cfg := s.cfg
	switch cfg.Algorithm {
	case LeakyBucket:
		return s.leakyBucket(now, cost, book)
	case SlidingLog:
		return s.slidingLog(now)
	case FixedWindow:
		return s.fixedWindow(now, cost, book)
	}
	return s.tokenBucket(now, cost, book)
}

// tokenBucket is a strict GCRA: cost units are admitted when they arrive
// no earlier than Burst-cost intervals before the theoretical arrival
// time.
func (s *Server) tokenBucket(now time.Time, cost int, book bool) verdict {
	interval := time.Second / time.Duration(s.cfg.Rate)
	tat := s.tat
	if tat.Before(now) {
		tat = now
	}
	burst := s.cfg.Burst
	v := verdict{limit: burst, reset: tat.Sub(now)}
	v.remaining = max(0, burst-int((tat.Sub(now)+interval-1)/interval))
	if allowAt := tat.Add(time.Duration(cost-burst) * interval); now.Before(allowAt) {
		v.wait = allowAt.Sub(now)
		return v
	}
	v.ok = true
	if book {
		s.tat = tat.Add(time.Duration(cost) * interval)
		v.remaining -= cost
		v.reset = s.tat.Sub(now)
	}
	return v
}

// leakyBucket is nginx's ngx_http_limit_req_module with burst and nodelay:
// excess, in thousandths of a request, drains at Rate per second over
// whole milliseconds, each request adds 1000 (after a drain that stops at
// 0), and a request that would take excess past Burst·1000 is refused.
func (s *Server) leakyBucket(now time.Time, cost int, book bool) verdict {
	ms := now.UnixMilli()
	rate, burst := int64(s.cfg.Rate), int64(s.cfg.Burst)*1000
	// drained is the excess left after the drain; below 0 when the bucket
	// has been idle. nginx's first request finds no state and counts as 0.
	drained := int64(-1000)
	if s.lastMs != 0 {
		drained = s.excess - rate*min(max(ms-s.lastMs, 0), 1<<31)
	}
	excess := max(drained+1000*int64(cost), 0)
	v := verdict{limit: int(burst/1000) + 1}
	v.remaining = max(0, int((burst-max(drained+1000, 0))/1000)+1)
	v.reset = time.Duration(max(drained, 0)/rate) * time.Millisecond
	if excess > burst {
		v.wait = time.Duration((excess-burst+rate-1)/rate) * time.Millisecond
		return v
	}
	v.ok = true
	if book {
		s.excess, s.lastMs = excess, ms
		v.remaining = max(v.remaining-cost, 0)
		v.reset = time.Duration(excess/rate) * time.Millisecond
	}
	return v
}

// slidingLog admits a request when fewer than Limit were admitted in the
// Window before now. The admitted arrivals double as the log, so it counts
// requests, whatever their cost.
func (s *Server) slidingLog(now time.Time) verdict {
	const cost = 1
	a, limit := s.stats.Arrivals, s.cfg.Limit
	lo := len(a)
	for lo > 0 && now.Sub(a[lo-1]) < s.cfg.Window {
		lo--
	}
	in := len(a) - lo
	v := verdict{limit: limit, remaining: max(limit-in, 0)}
	if in > 0 {
		v.reset = a[lo].Add(s.cfg.Window).Sub(now)
	}
	if in+cost <= limit {
		v.ok = true
		v.remaining -= cost
		if in == 0 {
			v.reset = s.cfg.Window
		}
		return v
	}
	// The units fit once the oldest in+cost-limit of the window have left.
	v.wait = a[lo+in+cost-limit-1].Add(s.cfg.Window).Sub(now)
	return v
}

// fixedWindow admits at most Limit units per Window since the server's
// start.
func (s *Server) fixedWindow(now time.Time, cost int, book bool) verdict {
	if w := int64(now.Sub(s.start) / s.cfg.Window); w != s.window {
		s.window, s.inWindow = w, 0
	}
	end := s.start.Add(time.Duration(s.window+1) * s.cfg.Window)
	v := verdict{limit: s.cfg.Limit, remaining: s.cfg.Limit - int(s.inWindow), reset: end.Sub(now)}
	if cost > v.remaining {
		v.wait = v.reset
		return v
	}
	v.ok = true
	if book {
		s.inWindow += int64(cost)
		v.remaining -= cost
	}
	return v
}

// left records that a refusal left the server, while the API refuses for
// wait more. wait is exact; the Retry-After it sent is that rounded up to
// whole seconds, as the header's format demands.
func (s *Server) left(wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.After(s.lastLeft) {
		s.lastLeft = now
	}
	if until := now.Add(wait); until.After(s.announced) {
		s.announced = until
	}
}

// seconds rounds d up to whole seconds, at least 1, as Retry-After and
// X-RateLimit-Reset carry it.
func seconds(d time.Duration) int {
	return max(int(math.Ceil(d.Seconds())), 1)
}

// Get fetches url with client, reads the whole body and closes it, and
// returns an error unless the status is 200.
func Get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// Stamp wraps base (nil means http.DefaultTransport) so that every attempt
// carries its send time: see [sendtime.Stamp].
func Stamp(base http.RoundTripper) http.RoundTripper { return sendtime.Stamp(base) }
