package redislimit

import (
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/throttle"
)

// TestBadInputNamesIt checks that values out of range get an error that
// names the field or option and the value, never a wrong one from an
// overflow or a bare nil dereference (found by a user's test).
func TestBadInputNamesIt(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	var nilBucket *TokenBucket
	tests := []struct {
		name    string
		build   func() error
		wantErr string
	}{
		{"leaky bucket of the largest capacity", func() error {
			_, err := NewLeakyBucket(rdb, throttle.PerSecond(5), math.MaxInt)
			return err
		}, "capacity of 9223372036854775807 is out of range"},
		{"sliding window, the largest tolerance", func() error {
			_, err := NewSlidingWindow(rdb, 1, time.Hour, WithTolerance(math.MaxInt64))
			return err
		}, "WithTolerance of 2562047h47m16.854775807s is out of range for a window of 1h0m0s"},
		{"sliding counter, the largest tolerance", func() error {
			_, err := NewSlidingWindowCounter(rdb, 1, time.Hour, WithTolerance(math.MaxInt64))
			return err
		}, "WithTolerance of 2562047h47m16.854775807s is out of range"},
		{"All of a nil part", func() error {
			_, err := All(nil)
			return err
		}, "All's part 0 is nil"},
		{"All of a nil bucket", func() error {
			_, err := All(nilBucket)
			return err
		}, "All's part 0 is nil"},
		{"an unknown FailMode", func() error {
			_, err := NewTokenBucket(rdb, throttle.PerSecond(5), 10, WithFailurePolicy(FailMode(7)))
			return err
		}, "WithFailurePolicy given FailMode(7), which is not FailClosed, FailOpen or FailShare"},
		{"a queue failing as a share", func() error {
			_, err := NewQueue(rdb, "q", 1, 0, WithFailurePolicy(FailShare))
			return err
		}, "NewQueue takes FailClosed, FailOpen or QueueFallback, got FailShare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorContains(t, tt.build(), tt.wantErr)
		})
	}
}

// TestOptionsOfAnotherKindRefused: an option meant for another kind of
// limiter is an error naming it, as WithTolerance on a Queue already is,
// not silently ignored. WithFloor says "Other limiters refuse it", and
// a Queue given WithSlotLease (mistaken for WithLease, which sets how
// long its permits last) kept the default lease without a word (found by
// a user's test).
func TestOptionsOfAnotherKindRefused(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	type closer interface{ Close() error }
	tests := []struct {
		name    string
		build   func() (closer, error)
		wantErr string
	}{
		{"a token bucket given WithFloor", func() (closer, error) {
			return NewTokenBucket(rdb, throttle.PerSecond(5), 10, WithFloor(throttle.PerSecond(1)))
		}, "does not take WithFloor"},
		{"a fixed window given WithFloor", func() (closer, error) {
			return NewFixedWindow(rdb, 5, time.Hour, WithFloor(throttle.PerSecond(1)))
		}, "does not take WithFloor"},
		{"a sliding counter given WithFloor", func() (closer, error) {
			return NewSlidingWindowCounter(rdb, 5, time.Hour, WithFloor(throttle.PerSecond(1)))
		}, "does not take WithFloor"},
		{"a queue given WithSlotLease", func() (closer, error) {
			return NewQueue(rdb, "q", 1, 0, WithSlotLease(5*time.Second))
		}, "NewQueue does not take WithSlotLease"},
		{"a queue given WithFloor", func() (closer, error) {
			return NewQueue(rdb, "q", 1, 0, WithFloor(throttle.PerSecond(1)))
		}, "NewQueue does not take WithFloor"},
		{"a queue given WithStated", func() (closer, error) {
			return NewQueue(rdb, "q", 1, 0, WithStated(throttle.UnitRequests))
		}, "NewQueue does not take WithStated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := tt.build()
			if err == nil {
				_ = l.Close()
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestNilRedisPanicsSayingSo: a nil *redis.Client (a typed nil in the
// redis.Scripter) panics with the package's message, as a nil Scripter
// does, not with a nil dereference deep inside the constructor.
func TestNilRedisPanicsSayingSo(t *testing.T) {
	t.Parallel()
	var rdb *redis.Client
	const want = "redislimit: nil redis.Scripter"
	assert.PanicsWithValue(t, want, func() { _, _ = NewClient(rdb) })
	assert.PanicsWithValue(t, want, func() { _, _ = NewTokenBucket(rdb, throttle.PerSecond(1), 1) })
	assert.PanicsWithValue(t, want, func() { _, _ = NewQueue(rdb, "q", 1, 0) })
	assert.PanicsWithValue(t, want, func() { _, _ = NewAdaptive(rdb, throttle.PerSecond(1)) })
}
