package egress_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// Bad input to a public constructor, option or call is an error that
// names the field and the value, never a panic (programming errors in
// options, a nil func, panic at construction with a clear message, as
// net/http does; see TestAcceptanceBadOptionsPanicClearly).
func TestAcceptanceBadInputIsAClearError(t *testing.T) {
	ctx := context.Background()
	second := time.Second
	err := func(_ any, err error) error { return err }
	tb := func() *throttle.TokenBucket { return mustTokenBucket(t, throttle.PerSecond(5), 1) }
	tests := []struct {
		name     string
		give     func() error
		wantText []string // each must appear in the error
	}{
		{name: "rate N 0", give: func() error { return err(throttle.NewTokenBucket(throttle.Rate{N: 0, Per: second}, 1)) }, wantText: []string{"Rate.N", "0"}},
		{name: "rate N negative", give: func() error { return err(throttle.NewTokenBucket(throttle.Rate{N: -5, Per: second}, 1)) }, wantText: []string{"Rate.N", "-5"}},
		{name: "rate Per 0", give: func() error { return err(throttle.NewLeakyBucket(throttle.Rate{N: 5}, 1)) }, wantText: []string{"Rate.Per", "0s"}},
		{name: "rate Per negative", give: func() error { return err(throttle.NewTokenBucket(throttle.Rate{N: 5, Per: -second}, 1)) }, wantText: []string{"Rate.Per", "-1s"}},
		{name: "rate below a nanosecond", give: func() error { return err(throttle.NewTokenBucket(throttle.Rate{N: 1e9 + 1, Per: second / 2}, 1)) }, wantText: []string{"1000000001", "500ms"}},
		{name: "burst 0", give: func() error { return err(throttle.NewTokenBucket(throttle.PerSecond(5), 0)) }, wantText: []string{"burst", "0"}},
		{name: "burst huge", give: func() error { return err(throttle.NewTokenBucket(throttle.PerSecond(5), 1<<62)) }, wantText: []string{"burst", "4611686018427387904"}},
		{name: "leaky capacity negative", give: func() error { return err(throttle.NewLeakyBucket(throttle.PerSecond(5), -3)) }, wantText: []string{"capacity", "-3"}},
		{name: "sliding window limit 0", give: func() error { return err(throttle.NewSlidingWindow(0, second)) }, wantText: []string{"limit", "0"}},
		{name: "sliding window window negative", give: func() error { return err(throttle.NewSlidingWindow(5, -second)) }, wantText: []string{"window", "-1s"}},
		{name: "sliding counter limit negative", give: func() error { return err(throttle.NewSlidingWindowCounter(-1, second)) }, wantText: []string{"limit", "-1"}},
		{name: "fixed window window 0", give: func() error { return err(throttle.NewFixedWindow(5, 0)) }, wantText: []string{"window", "0s"}},
		{name: "WithMaxKeys 0", give: func() error { return err(throttle.NewTokenBucket(throttle.PerSecond(5), 1, throttle.WithMaxKeys(0))) }, wantText: []string{"WithMaxKeys", "0"}},
		{name: "WithTolerance negative", give: func() error {
			return err(throttle.NewTokenBucket(throttle.PerSecond(5), 1, throttle.WithTolerance(-second)))
		}, wantText: []string{"WithTolerance", "-1s"}},
		{name: "Adaptive ceiling 0", give: func() error { return err(throttle.NewAdaptive(throttle.Rate{})) }, wantText: []string{"ceiling", "Rate.N", "0"}},
		{name: "Adaptive floor 0", give: func() error {
			return err(throttle.NewAdaptive(throttle.PerSecond(10), throttle.WithFloor(throttle.Rate{})))
		}, wantText: []string{"WithFloor", "Rate.N"}},
		{name: "Adaptive floor above the ceiling", give: func() error {
			return err(throttle.NewAdaptive(throttle.PerSecond(10), throttle.WithFloor(throttle.PerSecond(100))))
		}, wantText: []string{"WithFloor", "100", "ceiling", "10"}},
		{name: "Adaptive ceiling below a unit per max hold names the ceiling", give: func() error { return err(throttle.NewAdaptive(throttle.PerHour(1))) }, wantText: []string{"ceiling", "1/h", "max hold"}},
		{name: "Adaptive floor below a unit per max hold", give: func() error {
			return err(throttle.NewAdaptive(throttle.PerSecond(10), throttle.WithFloor(throttle.PerHour(1))))
		}, wantText: []string{"WithFloor", "1/h"}},
		{name: "WithMaxHold 0", give: func() error { return err(throttle.NewUpstream(throttle.WithMaxHold(0))) }, wantText: []string{"WithMaxHold", "0s"}},
		{name: "queue in flight 0", give: func() error { return err(queue.New(0, 0)) }, wantText: []string{"maxInFlight", "0"}},
		{name: "queue waiting negative", give: func() error { return err(queue.New(1, -1)) }, wantText: []string{"maxWaiting", "-1"}},
		{name: "Policy.MaxAttempts negative", give: func() error { return retryafter.Policy{MaxAttempts: -1}.Validate() }, wantText: []string{"MaxAttempts", "-1"}},
		{name: "Policy.MaxPause negative", give: func() error { return retryafter.Policy{MaxPause: -second}.Validate() }, wantText: []string{"MaxPause", "-1s"}},
		{name: "Policy.Statuses not a status", give: func() error { return retryafter.Policy{Statuses: []int{99}}.Validate() }, wantText: []string{"Statuses", "99"}},
		{name: "Reserve n 0", give: func() error { return err(tb().Reserve(ctx, "k", 0, 0)) }, wantText: []string{"n", "0"}},
		{name: "Reserve n above the burst", give: func() error { return err(tb().Reserve(ctx, "k", 2, 0)) }, wantText: []string{"2", "1"}},
		{name: "Pause negative", give: func() error { return tb().Pause(ctx, "k", -second) }, wantText: []string{"pause", "-1s"}},
		{name: "an empty All", give: func() error { return err(throttle.All().Reserve(ctx, "k", 1, 0)) }, wantText: []string{"All"}},
		{name: "Route picks nothing", give: func() error {
			return err(throttle.Route(func(string) throttle.Limiter { return nil }).Reserve(ctx, "k", 1, 0))
		}, wantText: []string{"Route", `"k"`}},
		{name: "Retry-After garbage", give: func() error { return err(retryafter.ParseValue("soon", time.Now())) }, wantText: []string{"Retry-After", `"soon"`}},
		{name: "Retry-After negative", give: func() error { return err(retryafter.ParseValue("-5", time.Now())) }, wantText: []string{"Retry-After", `"-5"`}},
		{name: "a negative request cost", give: func() error {
			tr := egress.NewTransport(&fakeBase{}, egress.WithLimiter(tb()))
			req := newRequest(t, egress.WithRequestCost(ctx, -2), http.MethodGet, "http://api.test/", nil)
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			return err
		}, wantText: []string{"-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got error
			require.NotPanics(t, func() { got = tt.give() })
			require.Error(t, got)
			for _, w := range tt.wantText {
				assert.Contains(t, got.Error(), w)
			}
		})
	}
}

// Programming errors in options (nil funcs, nil limiters, an invalid
// Policy) panic at construction, as net/http does, with a message that
// names the option.
func TestAcceptanceBadOptionsPanicClearly(t *testing.T) {
	tests := []struct {
		name     string
		give     func()
		wantText string
	}{
		{name: "WithLimiter nil", give: func() { egress.WithLimiter(nil) }, wantText: "WithLimiter"},
		{name: "WithUpstream nil", give: func() { egress.WithUpstream(nil) }, wantText: "WithUpstream"},
		{name: "WithKey nil", give: func() { egress.WithKey(nil) }, wantText: "WithKey"},
		{name: "WithCost nil", give: func() { egress.WithCost(nil) }, wantText: "WithCost"},
		{name: "WithRetry invalid", give: func() { egress.WithRetry(retryafter.Policy{MaxPause: -1}) }, wantText: "MaxPause"},
		{name: "NewTransport nil option", give: func() { egress.NewTransport(nil, nil) }, wantText: "nil"},
		{name: "WithClock nil", give: func() { throttle.WithClock(nil) }, wantText: "WithClock"},
		{name: "All given nil", give: func() { throttle.All(nil) }, wantText: "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				assert.Contains(t, fmt.Sprint(r), tt.wantText)
			}()
			tt.give()
		})
	}
}
