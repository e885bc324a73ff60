package middleware

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/throttle"
)

// fakeQuick is a limiter with the quick path, whose answers a test sets.
type fakeQuick struct {
	allow      bool
	allowErr   error
	left       int
	inspectErr error
	reserved   int // calls to Reserve
}

func (f *fakeQuick) AllowN(context.Context, string, int) (bool, error) { return f.allow, f.allowErr }

func (f *fakeQuick) Inspect(_ context.Context, key string) (throttle.KeyState, error) {
	return throttle.KeyState{Key: key, Remaining: f.left}, f.inspectErr
}

func (f *fakeQuick) Reserve(context.Context, string, int, time.Duration) (*throttle.Reservation, error) {
	f.reserved++
	return throttle.Refused(1500*time.Millisecond, 0), nil
}

// TestQuickPath checks the path taken on throttle's own limiters once
// they can be inspected: AllowN, then Inspect for what is left; Reserve
// only on a refusal, to learn when to come back.
func TestQuickPath(t *testing.T) {
	tests := []struct {
		name         string
		give         fakeQuick
		wantStatus   int
		wantField    string
		wantRetry    string
		wantReserved int
	}{
		{name: "admitted", give: fakeQuick{allow: true, left: 7}, wantStatus: 200, wantField: `"bucket";r=7;t=1`},
		{name: "admitted, inspect fails", give: fakeQuick{allow: true, left: 7, inspectErr: errors.New("x")}, wantStatus: 200, wantField: `"bucket";r=0;t=1`},
		{name: "refused", give: fakeQuick{allow: false}, wantStatus: 429, wantField: `"bucket";r=0;t=1`, wantRetry: "2", wantReserved: 1},
		{name: "error: Reserve answers it", give: fakeQuick{allowErr: errors.New("x")}, wantStatus: 429, wantField: `"bucket";r=0;t=1`, wantRetry: "2", wantReserved: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 10)
			if err != nil {
				t.Fatal(err)
			}
			f := tt.give
			m := New(&f, WithPolicies(func(string) *Policies { return Describe(tb) }))
			m.quick = &f
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, req)
			assert.Equal(t, tt.wantStatus, rec.Code)
			assert.Equal(t, tt.wantField, rec.Header().Get("RateLimit"))
			assert.Equal(t, tt.wantRetry, rec.Header().Get("Retry-After"))
			assert.Equal(t, tt.wantReserved, f.reserved)
		})
	}
}
