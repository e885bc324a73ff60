package throttle_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

func TestRateString(t *testing.T) {
	tests := []struct {
		name string
		give throttle.Rate
		want string
	}{
		{name: "per second", give: throttle.PerSecond(10), want: "10/s"},
		{name: "per minute", give: throttle.PerMinute(600), want: "600/min"},
		{name: "per hour", give: throttle.PerHour(5000), want: "5000/h"},
		{name: "per day", give: throttle.PerDay(100), want: "100/24h"},
		{name: "two hours", give: throttle.Rate{N: 3, Per: 2 * time.Hour}, want: "3/2h"},
		{name: "hour and a half", give: throttle.Rate{N: 7, Per: 90 * time.Minute}, want: "7/1h30m"},
		{name: "ten seconds", give: throttle.Rate{N: 1, Per: 10 * time.Second}, want: "1/10s"},
		{name: "fraction of a second", give: throttle.Rate{N: 5, Per: 1500 * time.Millisecond}, want: "5/1.5s"},
		{name: "milliseconds", give: throttle.Rate{N: 1, Per: 250 * time.Millisecond}, want: "1/250ms"},
		{name: "two minutes", give: throttle.Rate{N: 4, Per: 2 * time.Minute}, want: "4/2m"},
		{name: "zero", give: throttle.Rate{}, want: "0/0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.give.String())
		})
	}
}

func TestRateInterval(t *testing.T) {
	tests := []struct {
		name string
		give throttle.Rate
		want time.Duration
	}{
		{name: "exact", give: throttle.PerSecond(10), want: 100 * time.Millisecond},
		{name: "rounded up", give: throttle.PerSecond(3), want: 333333334 * time.Nanosecond},
		{name: "one nanosecond", give: throttle.PerSecond(1e9), want: time.Nanosecond},
		{name: "just above a nanosecond", give: throttle.Rate{N: 999_999_999, Per: time.Second}, want: 2 * time.Nanosecond},
		{name: "per day", give: throttle.PerDay(10_000), want: 8640 * time.Millisecond},
		// Per + N − 1 overflowed: −1281023h, and a bucket at that rate
		// admitted every unit at once.
		{name: "Per near its maximum", give: throttle.Rate{N: 2, Per: math.MaxInt64}, want: math.MaxInt64/2 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.give.Interval()
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRateIntervalInvalid(t *testing.T) {
	tests := []struct {
		name     string
		give     throttle.Rate
		wantErrs []string
	}{
		{name: "zero N", give: throttle.Rate{N: 0, Per: time.Second}, wantErrs: []string{"throttle:", "Rate.N", "0"}},
		{name: "negative N", give: throttle.PerSecond(-3), wantErrs: []string{"throttle:", "Rate.N", "-3"}},
		{name: "zero Per", give: throttle.Rate{N: 1}, wantErrs: []string{"throttle:", "Rate.Per", "0s"}},
		{name: "negative Per", give: throttle.Rate{N: 1, Per: -time.Second}, wantErrs: []string{"throttle:", "Rate.Per", "-1s"}},
		{name: "below a nanosecond", give: throttle.PerSecond(1e9 + 1), wantErrs: []string{"throttle:", "1000000001", "1s", "nanosecond"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.give.Interval()
			require.Error(t, err)
			for _, want := range tt.wantErrs {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}
