package egress_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// A hostile upstream (Retry-After a year, remaining 0 until years ahead,
// 429 forever, absurd quota values) never stalls a key longer than
// MaxPause, never drives a learned rate to zero, and is let go of once it
// behaves: requests flow again within MaxPause, at a useful share of the
// limit.
func TestAcceptanceHostileUpstream(t *testing.T) {
	const (
		hostileFor = 2 * time.Minute
		behaveFor  = 2 * time.Minute
		maxPause   = 20 * time.Second
	)
	year := 365 * 24 * time.Hour
	hostiles := []struct {
		name string
		give func(now time.Time, h http.Header) (int, bool)
	}{
		{name: "429 with Retry-After a year", give: func(now time.Time, h http.Header) (int, bool) {
			h.Set("Retry-After", strconv.Itoa(int(year/time.Second)))
			return http.StatusTooManyRequests, true
		}},
		{name: "429 with Retry-After an HTTP-date years ahead", give: func(now time.Time, h http.Header) (int, bool) {
			h.Set("Retry-After", now.Add(5*year).UTC().Format(http.TimeFormat))
			return http.StatusTooManyRequests, true
		}},
		{name: "200, remaining 0, epoch reset years ahead", give: func(now time.Time, h http.Header) (int, bool) {
			h.Set("X-RateLimit-Limit", "10")
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(10*year).Unix(), 10))
			return http.StatusOK, true
		}},
		{name: "429, remaining 0, IETF t a year", give: func(now time.Time, h http.Header) (int, bool) {
			h.Set("RateLimit-Policy", `"default";q=10;w=1`)
			h.Set("RateLimit", `"default";r=0;t=31536000`)
			return http.StatusTooManyRequests, true
		}},
		{name: "OpenAI remaining 0, reset 8760h", give: func(now time.Time, h http.Header) (int, bool) {
			h.Set("x-ratelimit-limit-requests", "10")
			h.Set("x-ratelimit-remaining-requests", "0")
			h.Set("x-ratelimit-reset-requests", "8760h0m0s")
			return http.StatusTooManyRequests, true
		}},
		{name: "bare 429 forever", give: func(now time.Time, h http.Header) (int, bool) {
			return http.StatusTooManyRequests, true
		}},
		{name: "bare 503 forever", give: func(now time.Time, h http.Header) (int, bool) {
			return http.StatusServiceUnavailable, true
		}},
		{name: "limit 0, remaining 1e18, negative and garbage", give: func(now time.Time, h http.Header) (int, bool) {
			h.Set("X-RateLimit-Limit", "0")
			h.Set("X-RateLimit-Remaining", "1000000000000000000")
			h.Set("X-RateLimit-Reset", "-5")
			h.Set("RateLimit", `"default";r=-3;t=garbage`)
			h.Set("x-ratelimit-remaining-requests", "NaN")
			h.Set("anthropic-ratelimit-requests-reset", "tomorrow")
			return http.StatusOK, true
		}},
	}
	configs := []struct {
		name string
		give func(t *testing.T) ([]egress.Option, *throttle.Adaptive)
	}{
		{name: "WithRetry and WithUpstream", give: func(t *testing.T) ([]egress.Option, *throttle.Adaptive) {
			return []egress.Option{egress.WithUpstream(mustUpstream(t))}, nil
		}},
		{name: "token bucket and WithUpstream", give: func(t *testing.T) ([]egress.Option, *throttle.Adaptive) {
			return []egress.Option{egress.WithLimiter(mustTokenBucket(t, throttle.PerSecond(20), 5)), egress.WithUpstream(mustUpstream(t))}, nil
		}},
		{name: "Adaptive (README: I do not know the limit)", give: func(t *testing.T) ([]egress.Option, *throttle.Adaptive) {
			a, err := throttle.NewAdaptive(throttle.PerSecond(100))
			require.NoError(t, err)
			return []egress.Option{egress.WithLimiter(a)}, a
		}},
	}
	for _, h := range hostiles {
		for _, c := range configs {
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					start := time.Now()
					behaves := start.Add(hostileFor)
					up := &simUpstream{algo: "fixed", limit: 10, window: time.Second, dialect: "ietf", ceilSec: true,
						hostile: func(now time.Time, hd http.Header) (int, bool) {
							if now.Before(behaves) {
								return h.give(now, hd)
							}
							return 0, false
						}}
					base := &simBase{h: up, in: spread(5 * time.Millisecond), out: spread(5 * time.Millisecond)}
					opts, adaptive := c.give(t)
					var mu sync.Mutex
					var clamped int
					obs := &egress.Observer{Clamped: func(egress.ClampInfo) { mu.Lock(); clamped++; mu.Unlock() }}
					opts = append(opts, egress.WithRetry(retryafter.Policy{MaxPause: maxPause}), egress.WithMaxWait(-1), egress.WithObserver(obs))
					tr := egress.NewTransport(base, opts...)

					var low float64 = -1
					stop := make(chan struct{})
					var wg sync.WaitGroup
					if adaptive != nil {
						wg.Add(1)
						go func() { // watch the learned rate
							defer wg.Done()
							tick := time.NewTicker(100 * time.Millisecond)
							defer tick.Stop()
							for {
								select {
								case <-stop:
									return
								case <-tick.C:
									if r := adaptive.Rate("api.test"); low < 0 || r < low {
										low = r
									}
								}
							}
						}()
					}
					failed, first := drive(tr, 4, hostileFor+behaveFor)
					close(stop)
					wg.Wait()

					end := start.Add(hostileFor + behaveFor)
					assert.Zero(t, failed, "requests failed: %v", first)
					assert.LessOrEqual(t, base.maxGap(start, end), maxPause+2*time.Second, "the key stalled longer than MaxPause")
					// Once it behaves, the pace comes back: the last minute
					// uses at least half the limit, and meets few 429s.
					lastMinute := up.admittedBetween(end.Add(-time.Minute), end)
					assert.GreaterOrEqual(t, lastMinute, 300, "admitted in the last minute, of 600 allowed")
					if adaptive != nil {
						assert.GreaterOrEqual(t, low, float64(throttle.DefaultFloorPerSecond), "the learned rate fell below its floor")
						assert.GreaterOrEqual(t, adaptive.Rate("api.test"), 5.0, "the learned rate recovered")
					}
					t.Logf("max gap %v, admitted in the last minute %d, lowest rate %.2f, clamped %d", base.maxGap(start, end), lastMinute, low, clamped)
				})
			})
		}
	}
}

// A throttling response whose own quota statement holds the key as long
// as its delay (a 429 stating r=0 and t a year ahead: both clamped to
// MaxPause) holds the key for MaxPause, not twice: the pause shifted the
// hold the same response had just recorded.
func TestAcceptancePauseAndStatementDoNotAddUp(t *testing.T) {
	const maxPause = 20 * time.Second
	tests := []struct {
		name       string
		giveOpts   func(*testing.T) []egress.Option
		giveHeader []string
		wantGap    time.Duration
	}{
		{name: "IETF r=0, t a year", giveOpts: retryOnly, giveHeader: []string{"RateLimit-Policy", `"default";q=10;w=1`, "RateLimit", `"default";r=0;t=31536000`}, wantGap: maxPause},
		// The limiter's 1 s spacing is shifted with its schedule.
		{name: "IETF r=0, t a year, beside a limiter of 1/s", giveOpts: oneASecond, giveHeader: []string{"RateLimit-Policy", `"default";q=10;w=1`, "RateLimit", `"default";r=0;t=31536000`}, wantGap: maxPause + time.Second},
		{name: "X-RateLimit at 0 until years ahead, Retry-After a year", giveOpts: retryOnly, giveHeader: []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "4102444800", "Retry-After", "31536000"}, wantGap: maxPause},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := firstSays(http.StatusTooManyRequests, tt.giveHeader...)
				opts := append(tt.giveOpts(t), egress.WithRetry(retryafter.Policy{MaxPause: maxPause}), egress.WithMaxWait(-1))
				tr := egress.NewTransport(base, opts...)
				for range 2 {
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
					require.NoError(t, err)
					drainClose(t, resp)
				}
				sent := base.times()
				require.Len(t, sent, 2)
				assert.Equal(t, tt.wantGap, sent[1].Sub(sent[0]))
			})
		})
	}
}

// Absurd quota values are clamped, reported through the Observer with the
// fields changed, and never panic or fail the request.
func TestAcceptanceAbsurdValuesAreReported(t *testing.T) {
	tests := []struct {
		name       string
		giveHeader []string
		wantFields []string
	}{
		{name: "remaining 1e18", giveHeader: []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "1000000000000000000", "X-RateLimit-Reset", "5"}, wantFields: []string{"Remaining"}},
		{name: "limit 0", giveHeader: []string{"X-RateLimit-Limit", "0", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "5"}, wantFields: []string{"Limit"}},
		{name: "an epoch reset years ahead", giveHeader: []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "4102444800"}, wantFields: []string{"Reset"}},
		{name: "an IETF window of a year", giveHeader: []string{"RateLimit-Policy", `"default";q=10;w=31536000`, "RateLimit", `"default";r=3;t=5`}, wantFields: []string{"Window"}},
		{name: "an Anthropic reset years ahead", giveHeader: []string{"anthropic-ratelimit-requests-limit", "10", "anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2099-01-01T00:00:00Z"}, wantFields: []string{"Reset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
					return respond(req, http.StatusOK, tt.giveHeader...), nil
				}}
				var got []egress.ClampInfo
				obs := &egress.Observer{Clamped: func(c egress.ClampInfo) { got = append(got, c) }}
				tr := egress.NewTransport(base, append(retryOnly(t), egress.WithObserver(obs))...)
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
				require.NoError(t, err)
				drainClose(t, resp)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				require.Len(t, got, 1)
				assert.Equal(t, "api.test", got[0].Key)
				assert.Equal(t, tt.wantFields, got[0].Fields)
			})
		})
	}
}
