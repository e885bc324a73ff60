package main

import (
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// adaptiveContenders lists egress set up as the README's recipe "I do
// not know the limit" shows: throttle.NewAdaptive with a ceiling of
// 1 000/s, the record of what the upstream states (WithUpstream), and
// WithRetry with the default Policy.
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
		t := egress.NewTransport(base(), egress.WithLimiter(l), egress.WithUpstream(u), egress.WithRetry(retryafter.Policy{}))
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
