package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/throttle"
)

// TestAvailable checks that a limiter reports Redis available until a
// call fails, and again once a call succeeds.
func TestAvailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give func(t *testing.T, s *server, l *TokenBucket)
		want bool
	}{
		{name: "before any call", give: func(*testing.T, *server, *TokenBucket) {}, want: true},
		{name: "after a call Redis answered", give: func(t *testing.T, _ *server, l *TokenBucket) {
			_, err := l.Reserve(context.Background(), "k", 1, 0)
			require.NoError(t, err)
		}, want: true},
		{name: "after a call Redis could not answer", give: func(t *testing.T, s *server, l *TokenBucket) {
			s.kill()
			_, err := l.Reserve(context.Background(), "k", 1, 0)
			require.ErrorIs(t, err, ErrUnavailable)
		}, want: false},
		{name: "after a recovery", give: func(t *testing.T, _ *server, l *TokenBucket) {
			l.client.breaker.failed(ErrUnavailable)
			l.client.breaker.succeeded()
		}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startRedis(t)
			l, err := NewTokenBucket(s.client(t), throttle.PerSecond(10), 1, WithTimeout(time.Second))
			require.NoError(t, err)
			defer closeAll(t, l)

			tt.give(t, s, l)

			assert.Equal(t, tt.want, l.Available())
			assert.Equal(t, tt.want, l.client.Available(), "the limiter reports its Client's state")
		})
	}
}
