package egress_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
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

// TestSettleUnderConcurrency runs 60 LLM calls at once through a
// Transport with WithEstimate over three buckets built WithMoveUp, a
// queue and retries, with 429s, deadlines, bodies never read, settles
// with the wrong count then the right one, two settles at once, and
// settles after the context ended. Run under -race; once every call is
// done and the buckets have had time to refill, each is full again with
// nothing booked ahead: nothing leaks.
func TestSettleUnderConcurrency(t *testing.T) {
	for seed := range uint64(6) {
		synctest.Test(t, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 1))
			var rmu sync.Mutex
			rn := func(n int) int { rmu.Lock(); defer rmu.Unlock(); return rnd.IntN(n) }
			var parts []*throttle.TokenBucket
			var ls []throttle.Limiter
			for _, n := range []int{20, 4000, 2000} {
				tb, err := throttle.NewTokenBucket(throttle.Rate{N: n, Per: time.Second}, n, throttle.WithMoveUp())
				require.NoError(t, err)
				parts, ls = append(parts, tb), append(ls, tb)
			}
			base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				time.Sleep(time.Duration(rn(300)) * time.Millisecond)
				if err := req.Context().Err(); err != nil {
					return nil, err
				}
				if rn(10) == 0 {
					return respond(req, http.StatusTooManyRequests, "Retry-After", "1"), nil
				}
				return respond(req, http.StatusOK), nil
			})
			client := &http.Client{Transport: egress.NewTransport(base,
				egress.WithLimiter(throttle.All(ls...)),
				egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{1, 300, 500}, nil }),
				egress.WithQueue(newQueue(t, 6, 1000)),
				egress.WithRetry(retryafter.Policy{}),
			)}
			var wg sync.WaitGroup
			for range 60 {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(200+rn(4000))*time.Millisecond)
					defer cancel()
					req := replayable(t, ctx, http.MethodPost)
					resp, err := client.Do(req)
					if err != nil {
						return
					}
					switch rn(5) {
					case 0: // never read, never settled
					case 1:
						_, _ = io.ReadAll(resp.Body)
						_ = egress.Settle(resp, 1, 100+rn(300), rn(600))
					case 2:
						_ = egress.Settle(resp, 1, 100)
						_ = egress.Settle(resp, 1, 100, rn(500))
					case 3:
						go func() { _ = egress.Settle(resp, 1, 50, 50) }()
						_ = egress.Settle(resp, 1, 300, 500)
					case 4:
						cancel()
						_ = egress.Settle(resp, 0, 0, 0)
					}
					_ = resp.Body.Close()
				})
			}
			wg.Wait()
			time.Sleep(10 * time.Second)
			for i, p := range parts {
				st, err := p.Inspect(context.Background(), "api.test")
				require.NoError(t, err)
				assert.Equal(t, []int{20, 4000, 2000}[i], st.Remaining, "part %d", i)
				assert.Zero(t, st.Ahead, "part %d", i)
			}
		})
	}
}
