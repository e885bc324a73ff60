// Package upstream is the strict API the bench scenarios run against: an
// httptest server that enforces its published limit exactly, answers 429
// with Retry-After beyond it, can be told to refuse everything for a
// pause, and counts what it saw.
package upstream

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/egress-go/egress/internal/sendtime"
)

// Limit is the upstream's published limit. Exactly one of Rate (a token
// bucket of Burst) or Window (a sliding log of Limit per Window) is used.
type Limit struct {
	// Rate is the sustained rate of the token bucket, in requests per second.
	Rate float64
	// Burst is the token bucket's size.
	Burst int
	// Limit and Window describe a sliding log: at most Limit requests in
	// any interval of length Window.
	Limit  int
	Window time.Duration
	// PauseAfter, when above 0, makes the upstream answer the request
	// after PauseAfter admitted ones with one 429 carrying
	// Retry-After: PauseFor, and refuse everything for PauseFor.
	PauseAfter int
	PauseFor   time.Duration
}

// Stats is what the upstream saw.
type Stats struct {
	// Admitted counts 2xx answers, Refused 429 answers.
	Admitted, Refused int
	// DuringPause counts requests sent after a 429 had left the server
	// and received before the Retry-After it carried had run out.
	DuringPause int
	// Arrivals holds the arrival time of every admitted request, and
	// Refusals that of every refused one.
	Arrivals, Refusals []time.Time
}

// Server is a strict upstream. It is safe for concurrent use.
type Server struct {
	srv *httptest.Server

	// mu guards everything below. It is held only for bookkeeping, never
	// while writing a response.
	mu    sync.Mutex
	limit Limit
	// tat is the token bucket's theoretical arrival time (GCRA).
	tat time.Time
	// stats.Arrivals doubles as the sliding log, newest last.
	stats Stats
	// pausedUntil is the end of the pause the upstream is in, if any.
	pausedUntil time.Time
	// lastLeft is when the latest 429 left the server; announced is the
	// latest time until which the upstream has said it refuses.
	lastLeft, announced time.Time
	paused              bool
}

// New starts a strict upstream on the loopback interface, speaking
// HTTP/1.1. Close it when done.
func New() *Server {
	s := &Server{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the upstream's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Close shuts the upstream down.
func (s *Server) Close() { s.srv.Close() }

// Reset forgets everything seen and enforces l from now on.
func (s *Server) Reset(l Limit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = l
	s.tat = time.Time{}
	s.stats = Stats{}
	s.pausedUntil, s.lastLeft, s.announced = time.Time{}, time.Time{}, time.Time{}
	s.paused = false
}

// Stats returns a copy of what the upstream has seen since Reset.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Arrivals = append([]time.Time(nil), s.stats.Arrivals...)
	st.Refusals = append([]time.Time(nil), s.stats.Refusals...)
	return st
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	sentAt := sendtime.Of(r)
	wait, ok := s.admit(time.Now(), sentAt)
	if ok {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
		return
	}
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	w.WriteHeader(http.StatusTooManyRequests)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	s.left(time.Now(), wait)
}

// admit decides one request arriving at now, and returns how long the
// client should wait when it is refused.
func (s *Server) admit(now time.Time, sentAt time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sentAt.IsZero() && sentAt.After(s.lastLeft) && now.Before(s.announced) {
		s.stats.DuringPause++
	}
	if now.Before(s.pausedUntil) {
		return s.refuse(now, s.pausedUntil.Sub(now))
	}
	l := s.limit
	if l.PauseAfter > 0 && !s.paused && s.stats.Admitted >= l.PauseAfter {
		s.paused = true
		s.pausedUntil = now.Add(l.PauseFor)
		return s.refuse(now, l.PauseFor)
	}
	var wait time.Duration
	var ok bool
	if l.Window > 0 {
		wait, ok = s.slidingLog(now)
	} else {
		wait, ok = s.tokenBucket(now)
	}
	if !ok {
		return s.refuse(now, wait)
	}
	s.stats.Admitted++
	s.stats.Arrivals = append(s.stats.Arrivals, now)
	return 0, true
}

// refuse counts a refusal at now; the client is to wait for wait. s.mu is
// held.
func (s *Server) refuse(now time.Time, wait time.Duration) (time.Duration, bool) {
	s.stats.Refused++
	s.stats.Refusals = append(s.stats.Refusals, now)
	return wait, false
}

// tokenBucket is a strict GCRA: a request is admitted when it arrives no
// earlier than (Burst-1) intervals before its theoretical arrival time.
func (s *Server) tokenBucket(now time.Time) (time.Duration, bool) {
	interval := time.Duration(float64(time.Second) / s.limit.Rate)
	tat := s.tat
	if tat.Before(now) {
		tat = now
	}
	allowAt := tat.Add(-time.Duration(s.limit.Burst-1) * interval)
	if now.Before(allowAt) {
		return allowAt.Sub(now), false
	}
	s.tat = tat.Add(interval)
	return 0, true
}

// slidingLog admits a request when fewer than Limit were admitted in the
// Window before it.
func (s *Server) slidingLog(now time.Time) (time.Duration, bool) {
	a := s.stats.Arrivals
	if len(a) < s.limit.Limit {
		return 0, true
	}
	oldest := a[len(a)-s.limit.Limit]
	if now.Sub(oldest) < s.limit.Window {
		return oldest.Add(s.limit.Window).Sub(now), false
	}
	return 0, true
}

// left records that a 429 left the server at now, while the upstream
// refuses for wait more. wait is exact; the Retry-After it sent is that
// rounded up to whole seconds, as the header's format demands.
func (s *Server) left(now time.Time, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.After(s.lastLeft) {
		s.lastLeft = now
	}
	if until := now.Add(wait); until.After(s.announced) {
		s.announced = until
	}
}

// Stamp wraps base (nil means http.DefaultTransport) so that every attempt
// carries its send time: see [sendtime.Stamp].
func Stamp(base http.RoundTripper) http.RoundTripper { return sendtime.Stamp(base) }
