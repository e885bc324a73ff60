package throttle_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
)

func TestNewXRateNilPanics(t *testing.T) {
	assert.PanicsWithValue(t, "throttle: NewXRate given a nil *rate.Limiter", func() {
		throttle.NewXRate(nil)
	})
}

// TestXRatePacesLikeItsLimiter books the same demand on an XRate and on a
// twin rate.Limiter at the same fake instants, and checks that every
// decision and delay agree.
func TestXRatePacesLikeItsLimiter(t *testing.T) {
	tests := []struct {
		name      string
		giveLimit rate.Limit
		giveBurst int
		giveN     []int
		giveGap   time.Duration // time between two requests
	}{
		{name: "10/s burst 1, back to back", giveLimit: 10, giveBurst: 1, giveN: []int{1, 1, 1, 1, 1}},
		{name: "10/s burst 3, back to back", giveLimit: 10, giveBurst: 3, giveN: []int{1, 1, 1, 1, 1, 1}},
		{name: "every 250ms burst 2, gaps of 100ms", giveLimit: rate.Every(250 * time.Millisecond), giveBurst: 2, giveN: []int{1, 1, 1, 1, 1}, giveGap: 100 * time.Millisecond},
		{name: "5/s burst 4, costs of 2", giveLimit: 5, giveBurst: 4, giveN: []int{2, 2, 2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				x := throttle.NewXRate(rate.NewLimiter(tt.giveLimit, tt.giveBurst))
				twin := rate.NewLimiter(tt.giveLimit, tt.giveBurst)
				for i, n := range tt.giveN {
					want := twin.ReserveN(time.Now(), n).Delay()
					got, err := x.Reserve(ctx, "any", n, -1)
					require.NoError(t, err)
					require.True(t, got.OK, "request %d", i)
					assert.Equal(t, want, got.Delay, "request %d", i)
					time.Sleep(tt.giveGap)
				}
			})
		})
	}
}

// TestXRateWaitSpacing sends callers through throttle.Wait on an XRate and
// checks when each one gets its unit.
func TestXRateWaitSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := throttle.NewXRate(rate.NewLimiter(rate.Every(100*time.Millisecond), 1))
		start := time.Now()
		var mu sync.Mutex
		var got []time.Duration
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				// Every key shares the one limiter.
				err := throttle.Wait(context.Background(), x, fmt.Sprintf("key-%d", i), 1)
				mu.Lock()
				defer mu.Unlock()
				got = append(got, time.Since(start))
				assert.NoError(t, err)
			})
			synctest.Wait() // book in a known order
		}
		wg.Wait()
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}
		assert.Equal(t, want, got)
	})
}

func TestXRateMaxWait(t *testing.T) {
	tests := []struct {
		name        string
		giveMaxWait time.Duration
		wantOK      bool
		wantDelay   time.Duration
	}{
		{name: "only now", giveMaxWait: 0, wantOK: false, wantDelay: time.Second},
		{name: "within", giveMaxWait: time.Second, wantOK: true, wantDelay: time.Second},
		{name: "beyond", giveMaxWait: 400 * time.Millisecond, wantOK: false, wantDelay: 600 * time.Millisecond},
		{name: "unbounded", giveMaxWait: -1, wantOK: true, wantDelay: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				x := throttle.NewXRate(rate.NewLimiter(1, 1))
				first, err := x.Reserve(ctx, "k", 1, 0)
				require.NoError(t, err)
				require.True(t, first.OK)

				got, err := x.Reserve(ctx, "k", 1, tt.giveMaxWait)
				require.NoError(t, err)
				assert.Equal(t, tt.wantOK, got.OK)
				assert.Equal(t, tt.wantDelay, got.Delay)

				// A refusal took nothing: the next slot is still 1s away.
				again, err := x.Reserve(ctx, "k", 1, -1)
				require.NoError(t, err)
				assert.Equal(t, map[bool]time.Duration{true: 2 * time.Second, false: time.Second}[tt.wantOK], again.Delay)
			})
		})
	}
}

func TestXRateCancelGivesBackTheLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		x := throttle.NewXRate(rate.NewLimiter(10, 1))
		_, err := x.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		second, err := x.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		require.Equal(t, 100*time.Millisecond, second.Delay)

		require.NoError(t, second.Cancel(ctx))
		require.NoError(t, second.Cancel(ctx), "Cancel is idempotent")

		third, err := x.Reserve(ctx, "k", 1, -1)
		require.NoError(t, err)
		assert.Equal(t, 100*time.Millisecond, third.Delay, "the cancelled slot is free again")
	})
}

func TestXRateCancelOnContextEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := throttle.NewXRate(rate.NewLimiter(1, 1))
		require.NoError(t, throttle.Wait(context.Background(), x, "k", 1))

		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		err := throttle.Wait(ctx, x, "k", 1)
		assert.ErrorIs(t, err, throttle.ErrLimitExceeded, "the slot lies past the deadline")

		r, err := x.Reserve(context.Background(), "k", 1, -1)
		require.NoError(t, err)
		assert.Equal(t, time.Second, r.Delay, "the refused caller took nothing")
	})
}

func TestXRateErrors(t *testing.T) {
	x := throttle.NewXRate(rate.NewLimiter(10, 2))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		giveCtx context.Context
		giveN   int
		wantMsg string
	}{
		{name: "above burst", giveCtx: context.Background(), giveN: 3, wantMsg: "throttle: n exceeds the limiter's capacity: n 3 is above the rate.Limiter's burst 2"},
		{name: "zero", giveCtx: context.Background(), giveN: 0, wantMsg: "throttle: n must be positive, got 0"},
		{name: "nil context", giveN: 1, wantMsg: "throttle: nil context"},
		{name: "cancelled context", giveCtx: cancelled, giveN: 1, wantMsg: "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := x.Reserve(tt.giveCtx, "k", tt.giveN, -1)
			assert.Nil(t, r)
			assert.Equal(t, tt.wantMsg, xrateErrText(err))
		})
	}
	sentinels := []struct {
		name    string
		giveCtx context.Context
		giveN   int
		wantErr error
	}{
		{name: "above burst", giveCtx: context.Background(), giveN: 3, wantErr: throttle.ErrExceedsCapacity},
		{name: "cancelled context", giveCtx: cancelled, giveN: 1, wantErr: context.Canceled},
	}
	for _, tt := range sentinels {
		t.Run(tt.name, func(t *testing.T) {
			_, err := x.Reserve(tt.giveCtx, "k", tt.giveN, -1)
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
	r, err := x.Reserve(context.Background(), "k", 1, -1)
	require.NoError(t, err)
	assert.True(t, r.OK, "the failed calls took nothing")
	assert.Equal(t, 1, r.Remaining)
}

func TestRateLimit(t *testing.T) {
	tests := []struct {
		name    string
		give    throttle.Rate
		want    rate.Limit
		wantErr string
	}{
		{name: "10/s", give: throttle.PerSecond(10), want: rate.Every(100 * time.Millisecond)},
		{name: "600/min", give: throttle.PerMinute(600), want: rate.Every(100 * time.Millisecond)},
		{name: "3/s rounds the interval up", give: throttle.PerSecond(3), want: rate.Every(333333334 * time.Nanosecond)},
		{name: "invalid", give: throttle.Rate{}, wantErr: "throttle: Rate.N must be positive, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.give.Limit()
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantErr, xrateErrText(err))
		})
	}
}

func TestRateFromLimit(t *testing.T) {
	tests := []struct {
		name    string
		give    rate.Limit
		want    throttle.Rate
		wantErr string
	}{
		{name: "whole", give: 10, want: throttle.PerSecond(10)},
		{name: "every 2s", give: rate.Every(2 * time.Second), want: throttle.Rate{N: 1, Per: 2 * time.Second}},
		{name: "fraction rounds the interval up", give: 3.3, want: throttle.Rate{N: 1, Per: 303030304 * time.Nanosecond}},
		{name: "inf", give: rate.Inf, wantErr: "throttle: rate.Limit is rate.Inf, which has no Rate"},
		{name: "nan", give: rate.Limit(math.NaN()), wantErr: "throttle: rate.Limit NaN has no Rate: it is not finite"},
		{name: "zero", give: 0, wantErr: "throttle: rate.Limit must be positive, got 0"},
		{name: "negative", give: -1, wantErr: "throttle: rate.Limit must be positive, got -1"},
		{name: "too fast", give: 2e9, wantErr: "throttle: rate.Limit 2e+09 is faster than 1 unit per nanosecond"},
		// x/time/rate takes these; the interval overflowed time.Duration
		// and the error blamed a negative Rate.Per the caller never gave.
		{name: "too slow", give: 1e-12, wantErr: "throttle: rate.Limit 1e-12 is slower than 1 unit per 2562047h47m16.854775807s, the longest time.Duration"},
		{name: "every longest duration", give: rate.Every(math.MaxInt64), wantErr: "throttle: rate.Limit 1.0842021724855043e-10 is slower than 1 unit per 2562047h47m16.854775807s, the longest time.Duration"},
		{name: "every 200 years", give: rate.Every(200 * 365 * 24 * time.Hour), want: throttle.Rate{N: 1, Per: 200 * 365 * 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := throttle.RateFromLimit(tt.give)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantErr, xrateErrText(err))
		})
	}
}

func TestRateEvery(t *testing.T) {
	tests := []struct {
		name    string
		give    time.Duration
		want    throttle.Rate
		wantErr string
	}{
		{name: "250ms", give: 250 * time.Millisecond, want: throttle.Rate{N: 1, Per: 250 * time.Millisecond}},
		{name: "zero", give: 0, wantErr: "throttle: Rate.Per must be positive, got 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := throttle.RateEvery(tt.give)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantErr, xrateErrText(err))
		})
	}
}

// TestXRateServesATransport sends requests through an egress Transport
// whose limiter is an XRate, and checks when each reaches the base.
func TestXRateServesATransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var got []time.Duration
		base := xrateBase(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, time.Since(start))
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		})
		tr := egress.NewTransport(base, egress.WithLimiter(throttle.NewXRate(rate.NewLimiter(rate.Every(100*time.Millisecond), 1))))
		var wg sync.WaitGroup
		for _, host := range []string{"a.example", "b.example", "c.example"} {
			wg.Go(func() {
				req, err := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
				if !assert.NoError(t, err) {
					return
				}
				resp, err := tr.RoundTrip(req)
				if assert.NoError(t, err) {
					_ = resp.Body.Close()
				}
			})
			synctest.Wait()
		}
		wg.Wait()
		assert.Equal(t, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}, got, "three hosts share one rate.Limiter")
	})
}

// xrateBase adapts a func to http.RoundTripper.
type xrateBase func(*http.Request) (*http.Response, error)

func (f xrateBase) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// xrateErrText returns err's message, or "" for nil.
func xrateErrText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
