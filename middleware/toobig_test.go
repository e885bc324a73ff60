package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// TestCostAboveCapacityStatesWhatIsLeft: a request whose cost is more
// than the bucket can ever grant is refused with 429 and no Retry-After,
// and its RateLimit field says what the key really has left: the budget
// did not refuse it, its cost did. Said to be at 0, a client following the
// headers paused every request of the key for nothing.
func TestCostAboveCapacityStatesWhatIsLeft(t *testing.T) {
	l := must(throttle.NewTokenBucket(throttle.PerSecond(10), 50))
	h := middleware.New(l, middleware.WithCost(func(*http.Request) int { return 51 })).Wrap(okHandler)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://api.test/", nil))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Empty(t, rec.Header().Get("Retry-After"))
	qs := retryafter.ParseQuota(rec.Header(), time.Now())
	require.NotEmpty(t, qs)
	assert.Equal(t, 50, qs[0].Remaining, "a fresh key has all 50 left: %v", rec.Header())
}
