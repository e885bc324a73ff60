package egress_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// TestObserverWaitedForTheUpstreamGate: with WithEstimate and
// WithUpstream, an attempt the configured limiter lets go at once but
// the upstream's stated quota holds back waits, and Observer.Waited
// reports that wait, as it reports any wait for a slot in the budget.
func TestObserverWaitedForTheUpstreamGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-RateLimit-Limit", "1")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10))
		})
		base := &inProcess{h: h}
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(1000), 1000)
		require.NoError(t, err)
		u, err := throttle.NewUpstream()
		require.NoError(t, err)
		var mu sync.Mutex
		var waits []egress.WaitInfo
		obs := &egress.Observer{Waited: func(w egress.WaitInfo) {
			mu.Lock()
			waits = append(waits, w)
			mu.Unlock()
		}}
		tr := egress.NewTransport(base, egress.WithLimiter(tb), egress.WithUpstream(u), egress.WithObserver(obs),
			egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{1}, nil }))
		client := &http.Client{Transport: tr}
		var took []time.Duration
		for range 2 {
			start := time.Now()
			req := httptest.NewRequest(http.MethodGet, "http://api.example.com/x", nil).WithContext(context.Background())
			req.RequestURI = ""
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			took = append(took, time.Since(start))
		}
		require.GreaterOrEqual(t, took[1], 500*time.Millisecond, "the second request waited for the quota's reset")
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, waits, 1, "the second request's wait is reported")
		assert.Equal(t, took[1], waits[0].Limiter)
	})
}

// TestObserverCountsMatchStats: under concurrency, retries and pauses,
// every callback is called once per event Stats counts.
func TestObserverCountsMatchStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		calls := map[string]int{}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls[r.URL.Path]++
			n := calls[r.URL.Path]
			mu.Unlock()
			if n <= 2 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		base := &inProcess{h: h}
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(5), 2)
		require.NoError(t, err)
		var sent, retrying, paused, waited, refused int
		attempts := map[string][]int{}
		obs := &egress.Observer{
			Sent: func(s egress.SentInfo) {
				mu.Lock()
				sent++
				attempts[s.Request.URL.Path] = append(attempts[s.Request.URL.Path], s.Attempt)
				mu.Unlock()
			},
			Retrying: func(egress.RetryInfo) { mu.Lock(); retrying++; mu.Unlock() },
			Paused:   func(egress.PauseInfo) { mu.Lock(); paused++; mu.Unlock() },
			Waited:   func(egress.WaitInfo) { mu.Lock(); waited++; mu.Unlock() },
			Refused:  func(egress.RefusalInfo) { mu.Lock(); refused++; mu.Unlock() },
		}
		tr := egress.NewTransport(base, egress.WithLimiter(tb), egress.WithObserver(obs),
			egress.WithRetry(retryafter.Policy{MaxAttempts: 5}))
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				resp, err := client.Get("http://api.example.com/" + strconv.Itoa(i))
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		st := tr.Stats()
		mu.Lock()
		defer mu.Unlock()
		assert.EqualValues(t, st.Sent, sent)
		assert.EqualValues(t, st.Retries, retrying)
		assert.EqualValues(t, st.Pauses, paused)
		assert.EqualValues(t, st.Refused, refused)
		for p, as := range attempts {
			for i, a := range as {
				assert.Equal(t, i+1, a, "%s attempts %v", p, as)
			}
		}
		t.Logf("stats %+v waited %d", st, waited)
	})
}
