package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// adaptiveContenders lists egress set up as the README's recipe "I do
// not know the limit" shows: throttle.NewAdaptive with a ceiling of
// 1 000/s and WithRetry with the default Policy. The Adaptive follows
// the quota headers itself; the record of what the upstream states
// (WithUpstream) beside it held keys back at resets it had stated too
// early, and cost 5–40% of the wall time on scenarios 5a–5c (see
// FOLLOW.md, "Adaptive with headers").
func adaptiveContenders() map[string]builder {
	return map[string]builder{"egress (adaptive)": func(s spec) (client, error) {
		l, err := throttle.NewAdaptive(throttle.PerSecond(1000))
		if err != nil {
			return nil, err
		}
		u, err := throttle.NewUpstream()
		if err != nil {
			return nil, err
		}
		rt := base()
		if path := os.Getenv("FOLLOW_ADAPTIVE_TRACE"); path != "" { // development only
			rt = &adaptiveTrace{next: rt, l: l, u: u, path: path}
		}
		opts := []egress.Option{egress.WithLimiter(l), egress.WithRetry(retryafter.Policy{})}
		if os.Getenv("FOLLOW_ADAPTIVE_RECORD") != "" { // development only: the recipe before, with the record beside
			opts = append(opts, egress.WithUpstream(u))
		}
		t := egress.NewTransport(rt, opts...)
		c := &adaptiveClient{httpDoer: httpDoer{httpClient{hc: &http.Client{Transport: t}}}, done: make(chan struct{})}
		key := ""
		if parsed, err := url.Parse(s.URL); err == nil {
			key = parsed.Host // the Transport's default key
		}
		c.wg.Go(func() { c.sample(l, key, time.Unix(0, s.StartAt)) })
		return c, nil
	}}
}

// learner is a client that reports the rate it learned over the run.
type learner interface {
	learned() []float64
}

// adaptiveClient is egress with an Adaptive limiter whose learned rate
// is sampled every 100 ms (bin) from the start, for the plots.
type adaptiveClient struct {
	httpDoer
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	rates []float64
}

// sample reads l's rate for key every bin from start until close.
func (c *adaptiveClient) sample(l interface{ Rate(key string) float64 }, key string, start time.Time) {
	select {
	case <-time.After(time.Until(start)):
	case <-c.done:
		return
	}
	tick := time.NewTicker(bin)
	defer tick.Stop()
	for {
		c.mu.Lock()
		c.rates = append(c.rates, l.Rate(key))
		c.mu.Unlock()
		select {
		case <-tick.C:
		case <-c.done:
			return
		}
	}
}

func (c *adaptiveClient) learned() []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]float64(nil), c.rates...)
}

func (c *adaptiveClient) close() {
	close(c.done)
	c.wg.Wait()
	c.httpDoer.close()
}

// adaptiveTrace logs every attempt the adaptive contender sends, for
// finding where time is lost (development only, FOLLOW_ADAPTIVE_TRACE):
// the Unix time in ns it was sent and answered, the status, the quota
// headers, the limiter's rate and the record's Inspect.
type adaptiveTrace struct {
	next http.RoundTripper
	l    *throttle.Adaptive
	u    *throttle.Upstream
	path string
	mu   sync.Mutex
}

func (t *adaptiveTrace) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	st, _ := t.u.Inspect(req.Context(), req.URL.Host)
	line := fmt.Sprintf("%d %d %d %s %s %s rate=%.1f rec.rem=%d rec.next=%v\n", sent.UnixNano(), time.Now().UnixNano(), resp.StatusCode,
		resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("X-RateLimit-Reset"),
		t.l.Rate(req.URL.Host), st.Remaining, st.Next)
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ferr := os.OpenFile(t.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if ferr == nil {
		_, _ = f.WriteString(line)
		_ = f.Close()
	}
	return resp, nil
}
