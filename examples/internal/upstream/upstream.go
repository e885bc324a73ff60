// Package upstream is the strict API that the programs under examples/
// run against: an httptest server that enforces its published limit
// exactly, as a token bucket measured at arrival, with an optional quota
// per "day", and answers 429 with Retry-After beyond them.
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

// Config is the API's published limit.
type Config struct {
	// Rate units per second, with bursts of up to Burst units: a strict
	// token bucket, checked when each request arrives.
	Rate  int
	Burst int

	// Quota units per Day, when Quota is above 0: a fixed window that
	// starts when the server does and resets every Day.
	Quota int
	Day   time.Duration

	// Cost returns how many units a request spends. nil means 1.
	Cost func(*http.Request) int

	// ThrottleAt, when above 0, makes the API answer the ThrottleAt-th
	// request it would have admitted with 429 and Retry-After:
	// ThrottleFor (whole seconds), and refuse everything until then.
	ThrottleAt  int
	ThrottleFor time.Duration
}

// Arrival is one request the API received.
type Arrival struct {
	At     time.Time // when it arrived
	SentAt time.Time // when the client sent it, if it was stamped
	Status int       // the status the API answered
}

// Server is a strict API. It is safe for concurrent use.
type Server struct {
	srv   *httptest.Server
	cfg   Config
	start time.Time

	// mu guards the fields below. It is never held while writing a
	// response.
	mu          sync.Mutex
	tat         time.Time // the token bucket's theoretical arrival time
	day         int       // index of the current day since start
	spent       int       // units spent in the current day
	admitted    int
	pausedUntil time.Time
	arrivals    []Arrival
}

// New starts the API on the loopback interface. Close it when done.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, start: time.Now()}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the API's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Start is when the API's first day began.
func (s *Server) Start() time.Time { return s.start }

// Close shuts the API down.
func (s *Server) Close() { s.srv.Close() }

// Arrivals returns every request the API has received, in order.
func (s *Server) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.arrivals...)
}

// TooMany returns how many 429s the API has sent.
func (s *Server) TooMany() int {
	n := 0
	for _, a := range s.Arrivals() {
		if a.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	cost := 1
	if s.cfg.Cost != nil {
		cost = s.cfg.Cost(r)
	}
	now := time.Now()
	wait, remaining, ok := s.admit(now, sendtime.Of(r), cost)
	if remaining >= 0 {
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.cfg.Quota))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.Itoa(seconds(s.resetAt(now).Sub(now))))
	}
	if ok {
		_, _ = w.Write([]byte("ok"))
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(seconds(wait)))
	w.WriteHeader(http.StatusTooManyRequests)
}

// admit decides a request of cost units arriving at now. It returns how
// long to wait when refused, and the units left today (-1 without a
// quota).
func (s *Server) admit(now, sentAt time.Time, cost int) (wait time.Duration, remaining int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	status := http.StatusTooManyRequests
	defer func() {
		s.arrivals = append(s.arrivals, Arrival{At: now, SentAt: sentAt, Status: status})
	}()
	remaining = -1
	if s.cfg.Quota > 0 {
		if day := int(now.Sub(s.start) / s.cfg.Day); day != s.day {
			s.day, s.spent = day, 0
		}
		remaining = s.cfg.Quota - s.spent
		if cost > remaining {
			return s.resetAt(now).Sub(now), remaining, false
		}
	}
	if now.Before(s.pausedUntil) {
		return s.pausedUntil.Sub(now), remaining, false
	}
	interval := time.Second / time.Duration(s.cfg.Rate)
	tat := s.tat
	if tat.Before(now) {
		tat = now
	}
	if allowAt := tat.Add(time.Duration(cost-s.cfg.Burst) * interval); now.Before(allowAt) {
		return allowAt.Sub(now), remaining, false
	}
	if s.admitted++; s.admitted == s.cfg.ThrottleAt {
		s.pausedUntil = now.Add(s.cfg.ThrottleFor)
		return s.cfg.ThrottleFor, remaining, false
	}
	s.tat = tat.Add(time.Duration(cost) * interval)
	if s.cfg.Quota > 0 {
		s.spent += cost
		remaining -= cost
	}
	status = http.StatusOK
	return 0, remaining, true
}

// resetAt returns when the day that holds now ends.
func (s *Server) resetAt(now time.Time) time.Time {
	return s.start.Add((now.Sub(s.start)/s.cfg.Day + 1) * s.cfg.Day)
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
