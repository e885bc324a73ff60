package egress_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/egress-go/egress"
)

// simUpstream is a server-side limiter written as an http.Handler, as a
// third party would write one, that states its quota in one header
// dialect and answers 429 with Retry-After when a request is over it.
// simBase serves it in process through httptest.NewRecorder, so that a
// synctest bubble drives its clock (a real socket is not durably
// blocking, and would stop the bubble's clock from moving).
//
// Its own clock is the bubble's plus skew, and its windows start at the
// Unix epoch plus offset.
type simUpstream struct {
	algo    string // "fixed": L per window; "ondemand": L per window, each starting at the first request after the last ended (ulule/limiter); "bucket": a token bucket of L refilling L per window; "leaky": Shopify's bucket of L leaking L per window
	limit   int
	window  time.Duration
	offset  time.Duration // fixed windows start at epoch + offset + k×window
	skew    time.Duration // the server's clock less the client's
	dialect string        // see headers
	ceilSec bool          // whole-second resets rounded up (true) or truncated (false, as most servers do)
	noDate  bool          // send no Date header

	// hostile, when set, answers instead of the limiter while it returns
	// true, with the headers it sets and the status it returns.
	hostile func(now time.Time, h http.Header) (status int, ok bool)

	mu       sync.Mutex
	idx      int64     // fixed: the current window
	count    int       // fixed, ondemand: admitted in it
	ends     time.Time // ondemand: when the current window ends
	level    float64
	last     time.Time
	admitted []time.Time // server-clock times of admitted requests
	refused  int
}

func (s *simUpstream) now() time.Time { return time.Now().Add(s.skew) }

// ServeHTTP admits or refuses one request and states the quota.
func (s *simUpstream) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	h := w.Header()
	if !s.noDate {
		h.Set("Date", now.UTC().Format(http.TimeFormat))
	}
	if s.hostile != nil {
		if status, ok := s.hostile(now, h); ok {
			if status == http.StatusTooManyRequests {
				s.refused++
			}
			w.WriteHeader(status)
			return
		}
	}
	ok, remaining, reset := s.take(now)
	s.state(h, now, remaining, reset)
	if !ok {
		s.refused++
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(reset.Seconds()))))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.admitted = append(s.admitted, now)
	w.WriteHeader(http.StatusOK)
}

// take admits one unit at now, if the limiter has it, and returns what
// remains and how long until the quota returns (fixed: the window's end;
// bucket: full again; leaky: one more fits).
func (s *simUpstream) take(now time.Time) (ok bool, remaining int, reset time.Duration) {
	switch s.algo {
	case "fixed":
		since := now.Sub(time.Unix(0, 0).Add(s.offset))
		idx := int64(since / s.window)
		if idx != s.idx {
			s.idx, s.count = idx, 0
		}
		end := time.Unix(0, 0).Add(s.offset + time.Duration(idx+1)*s.window)
		if s.count < s.limit {
			s.count++
			return true, s.limit - s.count, end.Sub(now)
		}
		return false, 0, end.Sub(now)
	case "ondemand":
		if !now.Before(s.ends) {
			s.ends, s.count = now.Add(s.window), 0
		}
		if s.count < s.limit {
			s.count++
			return true, s.limit - s.count, s.ends.Sub(now)
		}
		return false, 0, s.ends.Sub(now)
	case "bucket":
		perUnit := s.window / time.Duration(s.limit)
		if s.last.IsZero() {
			s.level = float64(s.limit)
		} else {
			s.level = min(float64(s.limit), s.level+float64(now.Sub(s.last))/float64(perUnit))
		}
		s.last = now
		ok = s.level >= 1
		if ok {
			s.level--
		}
		full := time.Duration((float64(s.limit) - s.level) * float64(perUnit))
		return ok, int(s.level), full
	case "leaky":
		perUnit := s.window / time.Duration(s.limit)
		if !s.last.IsZero() {
			s.level = max(0, s.level-float64(now.Sub(s.last))/float64(perUnit))
		}
		s.last = now
		ok = s.level+1 <= float64(s.limit)
		if ok {
			s.level++
		}
		used := int(math.Ceil(s.level))
		return ok, s.limit - used, perUnit
	}
	panic("simUpstream: unknown algo " + s.algo)
}

// state writes the quota in s's dialect.
func (s *simUpstream) state(h http.Header, now time.Time, remaining int, reset time.Duration) {
	end := now.Add(reset)
	epoch := end.Unix() // truncated
	secs := int64(reset / time.Second)
	if s.ceilSec {
		if end.Truncate(time.Second) != end {
			epoch++
		}
		secs = int64(math.Ceil(reset.Seconds()))
	}
	limit, rem := strconv.Itoa(s.limit), strconv.Itoa(remaining)
	switch s.dialect {
	case "ietf":
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, s.limit, int(s.window/time.Second)))
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, secs))
	case "ietf-nopolicy":
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, secs))
	case "x-epoch":
		h.Set("X-RateLimit-Limit", limit)
		h.Set("X-RateLimit-Remaining", rem)
		h.Set("X-RateLimit-Reset", strconv.FormatInt(epoch, 10))
	case "x-delta":
		h.Set("X-RateLimit-Limit", limit)
		h.Set("X-RateLimit-Remaining", rem)
		h.Set("X-RateLimit-Reset", strconv.FormatInt(secs, 10))
	case "github":
		h.Set("X-RateLimit-Limit", limit)
		h.Set("X-RateLimit-Remaining", rem)
		h.Set("X-RateLimit-Used", strconv.Itoa(s.limit-remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(epoch, 10))
		h.Set("X-RateLimit-Resource", "core")
	case "openai":
		h.Set("x-ratelimit-limit-requests", limit)
		h.Set("x-ratelimit-remaining-requests", rem)
		h.Set("x-ratelimit-reset-requests", reset.Round(time.Millisecond).String())
	case "anthropic":
		h.Set("anthropic-ratelimit-requests-limit", limit)
		h.Set("anthropic-ratelimit-requests-remaining", rem)
		h.Set("anthropic-ratelimit-requests-reset", end.UTC().Truncate(time.Second).Format(time.RFC3339))
	case "shopify":
		h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", s.limit-remaining, s.limit))
	default:
		panic("simUpstream: unknown dialect " + s.dialect)
	}
}

// stats returns how many requests s admitted and refused.
func (s *simUpstream) stats() (admitted, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.admitted), s.refused
}

// admittedBetween counts the requests admitted in [from, to) on the
// client's clock.
func (s *simUpstream) admittedBetween(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.admitted {
		c := at.Add(-s.skew)
		if !c.Before(from) && c.Before(to) {
			n++
		}
	}
	return n
}

// simBase is a base RoundTripper that carries each request to h in in(n)
// and its answer back in out(n), where n counts the requests, so that
// answers may arrive in another order than their requests were handled.
type simBase struct {
	h       http.Handler
	in, out func(n int) time.Duration

	mu   sync.Mutex
	n    int
	sent []time.Time // when each request reached the upstream
}

// maxGap returns the longest time between two requests reaching the
// upstream in [from, to), counting from from and to to.
func (b *simBase) maxGap(from, to time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var gap time.Duration
	last := from
	for _, at := range b.sent {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	return max(gap, to.Sub(last))
}

func (b *simBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	b.mu.Lock()
	n := b.n
	b.n++
	b.mu.Unlock()
	if b.in != nil {
		if err := sleep(req.Context(), b.in(n)); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	b.sent = append(b.sent, time.Now())
	b.mu.Unlock()
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	if b.out != nil {
		if err := sleep(req.Context(), b.out(n)); err != nil {
			return nil, err
		}
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// spread returns a latency func cycling through ds.
func spread(ds ...time.Duration) func(int) time.Duration {
	return func(n int) time.Duration { return ds[n%len(ds)] }
}

// drive sends requests to tr from workers goroutines until for has
// passed, and returns how many the Transport refused or failed, and the
// first such error.
func drive(tr *egress.Transport, workers int, d time.Duration) (failed int, first error) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	end := time.Now().Add(d)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				ctx, cancel := context.WithDeadline(context.Background(), end)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				cancel()
				if err == nil {
					continue
				}
				// An error comes back without the clock moving, so the
				// worker stops: at the end of the run, or on a failure.
				if !errors.Is(err, context.DeadlineExceeded) && !isDeadlineRefusal(err) {
					mu.Lock()
					failed++
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
				return
			}
		}()
	}
	wg.Wait()
	return failed, first
}

// isDeadlineRefusal reports a refusal because the run's deadline comes
// before the slot: the end of the run, not a failure.
func isDeadlineRefusal(err error) bool {
	var to interface{ Timeout() bool }
	return errors.As(err, &to) && to.Timeout()
}

// firstSays returns a base that answers the first request with status
// and the header pairs, and every later one with a plain 200.
func firstSays(status int, header ...string) *fakeBase {
	return &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
		if n == 0 {
			return respond(req, status, header...), nil
		}
		return respond(req, http.StatusOK), nil
	}}
}
