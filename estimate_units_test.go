package egress_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/llmupstream"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// inProcess serves requests with a handler in the caller's goroutine,
// so that a synctest bubble holds the whole exchange. It counts the
// 429s it returns.
type inProcess struct {
	h        http.Handler
	tooMany  atomic.Int64
	attempts atomic.Int64
}

func (p *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	p.attempts.Add(1)
	if resp.StatusCode == http.StatusTooManyRequests {
		p.tooMany.Add(1)
	}
	return resp, nil
}

// TestUpstreamTokenQuotasBoundTheParts runs a batch against an
// Anthropic-style API whose output tokens another client also spends,
// unseen by the Transport's configured limiter. With WithUpstream, the
// output-tokens quota the API states bounds the output part, and the
// batch meets at most 0.5% 429s; without it (a Transport with
// WithEstimate keeps no record of its own), more than 1%. Either way the
// API's output limit is used to at least 90%: the record leaves the
// other client its share, and no more.
func TestUpstreamTokenQuotasBoundTheParts(t *testing.T) {
	tests := []struct {
		name         string
		giveUpstream bool
		wantMost     float64 // 429s per request, at most
		wantLeast    float64 // 429s per request, at least
	}{
		{name: "with the record", giveUpstream: true, wantMost: 0.005},
		{name: "without", giveUpstream: false, wantMost: 1, wantLeast: 0.01},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tooMany, used := runSharedLLM(t, tt.giveUpstream)
				assert.LessOrEqual(t, tooMany, tt.wantMost, "429s per call")
				assert.GreaterOrEqual(t, tooMany, tt.wantLeast, "429s per call")
				assert.GreaterOrEqual(t, used, 0.9, "the output limit used")
			})
		})
	}
}

// runSharedLLM sends 400 calls from 16 goroutines through a Transport
// configured with the API's published limits, while another client
// spends a share of the output tokens, and returns the Transport's 429s
// per call and the part of the API's output limit used (by both), from
// full to done.
func runSharedLLM(t *testing.T, withUpstream bool) (tooMany, used float64) {
	const (
		calls     = 400
		workers   = 16
		prompt    = 200
		maxTokens = 400
	)
	limits := llmupstream.Limits{Requests: 1000, InputTokens: 40000, OutputTokens: 6000, Period: time.Second}
	api, err := llmupstream.New(llmupstream.Config{Limits: limits, Seed: 1, FirstToken: 20 * time.Millisecond, PerToken: 100 * time.Microsecond})
	require.NoError(t, err)
	base := &inProcess{h: api}

	var ls []throttle.Limiter
	for _, n := range []int{limits.Requests, limits.InputTokens, limits.OutputTokens} {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: n, Per: limits.Period}, n)
		require.NoError(t, err)
		ls = append(ls, tb)
	}
	opts := []egress.Option{
		egress.WithLimiter(throttle.All(ls...)),
		egress.WithEstimate(llmEstimate),
		egress.WithRetry(retryafter.Policy{MaxAttempts: 10}),
	}
	var u *throttle.Upstream
	if withUpstream {
		u, err = throttle.NewUpstream()
		require.NoError(t, err)
		opts = append(opts, egress.WithUpstream(u))

	}
	client := &http.Client{Transport: egress.NewTransport(base, opts...)}

	// The other client: a call of max_tokens 900 every 100 ms: 9 000
	// output tokens a second held at admission, and 2 700 spent, 45% of
	// the limit.
	stop := make(chan struct{})
	var other sync.WaitGroup
	other.Add(1)
	go func() {
		defer other.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				body, _ := json.Marshal(llmupstream.Request{PromptTokens: prompt, MaxTokens: 900})
				req := httptest.NewRequest(http.MethodPost, llmupstream.Path, bytes.NewReader(body))
				api.ServeHTTP(httptest.NewRecorder(), req)
			}
		}
	}()

	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range jobs {
				body, err := json.Marshal(llmupstream.Request{PromptTokens: prompt, MaxTokens: maxTokens, Seed: uint64(seed + 1)})
				if !assert.NoError(t, err) {
					continue
				}
				resp, err := client.Post("http://llm.test"+llmupstream.Path, "application/json", bytes.NewReader(body))
				if !assert.NoError(t, err) {
					continue
				}
				if assert.Equal(t, http.StatusOK, resp.StatusCode) {
					u, err := llmupstream.ReadUsage(resp.Body, false)
					assert.NoError(t, err)
					assert.NoError(t, egress.Settle(resp, 1, u.InputTokens, u.OutputTokens))
				}
				assert.NoError(t, resp.Body.Close())
			}
		}()
	}
	for i := range calls {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(stop)
	other.Wait()
	st := api.Stats()
	t.Logf("%v: %d attempts, %d 429s for %d calls; the API: %d 429s, %d requests, %d output tokens", time.Since(start), base.attempts.Load(), base.tooMany.Load(), calls, st.TooMany, st.Requests, st.OutputTokens)
	wall := time.Since(start)
	most := float64(limits.OutputTokens) * (1 + wall.Seconds()/limits.Period.Seconds())
	return float64(base.tooMany.Load()) / calls, float64(st.OutputTokens) / most
}
