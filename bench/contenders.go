package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/egress-go/egress/internal/upstream"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/go-redis/redis_rate/v10"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// builder makes a contender's client for one worker.
type builder func(s spec) (client, error)

// contenders maps every contender's name to its builder.
func contenders() map[string]builder {
	m := map[string]builder{
		"x/time/rate":              xrate(false),
		"x/time/rate (rate/N)":     xrate(true),
		"go-retryablehttp":         retryable,
		"failsafe-go":              failsafe,
		"failsafe-go (retry only)": failsafeRetryOnly,
		"naive":                    naive,
		"redis_rate":               redisRate,
	}
	for name, b := range egressContenders() {
		m[name] = b
	}
	return m
}

// base is the transport below every contender: the same connection pool
// settings for all, with every attempt stamped as it is sent.
func base() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 128
	return upstream.Stamp(t)
}

// httpClient is a plain client over base.
type httpClient struct{ hc *http.Client }

func newHTTPClient() httpClient { return httpClient{hc: &http.Client{Transport: base()}} }

func (c httpClient) get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return c.hc.Do(req)
}

func (c httpClient) close() { c.hc.CloseIdleConnections() }

// retryLoop is the loop peers without retries of their own are wrapped
// in: wait for permit, send, and on a 429 sleep backoff and go again.
func (c httpClient) retryLoop(ctx context.Context, url string, permit func(context.Context) error, backoff func(*http.Response) time.Duration) (int, error) {
	for {
		if err := permit(ctx); err != nil {
			return 0, err
		}
		resp, err := c.get(ctx, url)
		if err != nil {
			return 0, err
		}
		drain(resp)
		if resp.StatusCode != http.StatusTooManyRequests {
			return resp.StatusCode, nil
		}
		if err := sleep(ctx, backoff(resp)); err != nil {
			return 0, err
		}
	}
}

// retryAfter reads a 429's Retry-After in seconds, as hand-written loops
// do; one second when it is missing.
func retryAfter(resp *http.Response) time.Duration {
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return time.Second
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// xrate is golang.org/x/time/rate used as its docs show: Wait before
// every attempt. On a 429 the goroutine sleeps the Retry-After and tries
// again. split divides rate and burst by the number of processes.
func xrate(split bool) builder {
	return func(s spec) (client, error) {
		r, burst := s.Rate, s.Burst
		if split {
			r, burst = r/float64(s.Procs), max(burst/s.Procs, 1)
		}
		return &xrateClient{httpClient: newHTTPClient(), lim: rate.NewLimiter(rate.Limit(r), burst)}, nil
	}
}

type xrateClient struct {
	httpClient
	lim *rate.Limiter
}

func (c *xrateClient) do(ctx context.Context, url string) (int, error) {
	return c.retryLoop(ctx, url, c.lim.Wait, retryAfter)
}

// naive is the loop people write first: no limiter; on a 429, try again
// after 100 ms.
func naive(spec) (client, error) { return naiveClient{newHTTPClient()}, nil }

type naiveClient struct{ httpClient }

func (c naiveClient) do(ctx context.Context, url string) (int, error) {
	return c.retryLoop(ctx, url,
		func(context.Context) error { return nil },
		func(*http.Response) time.Duration { return 100 * time.Millisecond })
}

// retryable is hashicorp/go-retryablehttp with its defaults (its
// DefaultBackoff honours Retry-After on 429 and 503), no limiter, logging
// off, and RetryMax raised from 4 to 10 so that every request finishes.
func retryable(spec) (client, error) {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: base()}
	rc.Logger = nil
	rc.RetryMax = 10
	return retryableClient{rc}, nil
}

type retryableClient struct{ rc *retryablehttp.Client }

func (c retryableClient) do(ctx context.Context, url string) (int, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.rc.Do(req)
	if err != nil {
		return 0, err
	}
	drain(resp)
	return resp.StatusCode, nil
}

func (c retryableClient) close() { c.rc.HTTPClient.CloseIdleConnections() }

// failsafe is failsafe-go's http.RoundTripper with its HTTP retry policy
// (which honours Retry-After) outside a smooth rate limiter at the
// published rate, so that every attempt waits for a permit. The limiter
// may wait up to a minute, and the policy retries up to 10 times.
func failsafe(s spec) (client, error) {
	rl := ratelimiter.NewSmoothBuilder[*http.Response](uint(s.Rate), time.Second).
		WithMaxWaitTime(time.Minute).Build()
	rp := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(10).Build()
	return httpDoer{httpClient{hc: &http.Client{Transport: failsafehttp.NewRoundTripper(base(), rp, rl)}}}, nil
}

// failsafeRetryOnly is failsafe-go's HTTP retry policy with no limiter,
// for an upstream whose limit is unknown.
func failsafeRetryOnly(spec) (client, error) {
	rp := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(10).Build()
	return httpDoer{httpClient{hc: &http.Client{Transport: failsafehttp.NewRoundTripper(base(), rp)}}}, nil
}

// httpDoer is a client whose http.Client does all the work.
type httpDoer struct{ httpClient }

func (c httpDoer) do(ctx context.Context, url string) (int, error) {
	resp, err := c.get(ctx, url)
	if err != nil {
		return 0, err
	}
	drain(resp)
	return resp.StatusCode, nil
}

// redisRate is go-redis/redis_rate, which answers allowed or not: on a
// refusal the caller sleeps the RetryAfter it returns and asks again, as
// its README's Allow suggests. On a 429 it sleeps the Retry-After.
func redisRate(s spec) (client, error) {
	rt := &roundTrips{}
	rdb := countingClient(s.Redis, 4*s.Goroutines, rt)
	return &redisRateClient{
		httpClient: newHTTPClient(),
		rdb:        rdb,
		rt:         rt,
		lim:        redis_rate.NewLimiter(rdb),
		limit:      redis_rate.Limit{Rate: int(s.Rate), Burst: s.Burst, Period: time.Second},
	}, nil
}

type redisRateClient struct {
	httpClient
	rt    *roundTrips
	rdb   *redis.Client
	lim   *redis_rate.Limiter
	limit redis_rate.Limit
}

func (c *redisRateClient) do(ctx context.Context, url string) (int, error) {
	return c.retryLoop(ctx, url, c.permit, retryAfter)
}

// permit asks redis_rate until it allows, sleeping the RetryAfter it
// returns in between.
func (c *redisRateClient) permit(ctx context.Context) error {
	for {
		res, err := c.lim.Allow(ctx, "bench", c.limit)
		if err != nil {
			return fmt.Errorf("redis_rate: %w", err)
		}
		if res.Allowed > 0 {
			return nil
		}
		if err := sleep(ctx, res.RetryAfter); err != nil {
			return err
		}
	}
}

func (c *redisRateClient) redisRoundTrips() int64 { return c.rt.n.Load() }

func (c *redisRateClient) close() {
	c.httpClient.close()
	_ = c.rdb.Close()
}
