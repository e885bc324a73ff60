package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
)

// inspectedLimiter grants every request at once and reports fixed states
// through throttle.Inspector, as the built-in limiters do.
type inspectedLimiter struct {
	states map[string]throttle.KeyState
	err    error
}

func (l *inspectedLimiter) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	return &throttle.Reservation{OK: true}, nil
}

func (l *inspectedLimiter) Inspect(ctx context.Context, key string) (throttle.KeyState, error) {
	if l.err != nil {
		return throttle.KeyState{}, l.err
	}
	st, ok := l.states[key]
	if !ok {
		return throttle.KeyState{Key: key, Remaining: 10}, nil // a fresh budget
	}
	return st, nil
}

// uninspectedLimiter cannot report its keys.
type uninspectedLimiter struct{}

func (uninspectedLimiter) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	return &throttle.Reservation{OK: true}, nil
}

func newInspected() *inspectedLimiter {
	return &inspectedLimiter{states: map[string]throttle.KeyState{
		"api.example.com": {Remaining: 0, Next: 250 * time.Millisecond, Ahead: 2, Paused: 500 * time.Millisecond},
	}}
}

// snapshotBase answers 200 with an empty body.
type snapshotBase struct{}

func (snapshotBase) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// sendTwo sends two requests through tr.
func sendTwo(t *testing.T, tr *egress.Transport) {
	t.Helper()
	for range 2 {
		req, err := http.NewRequest(http.MethodGet, "http://api.example.com/", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
}

func TestTransportSnapshot(t *testing.T) {
	tests := []struct {
		name        string
		giveLimiter throttle.Limiter
		giveKeys    []string
		want        egress.Snapshot
	}{
		{
			name:        "counters only",
			giveLimiter: uninspectedLimiter{},
			want:        egress.Snapshot{Stats: egress.Stats{Sent: 2}},
		},
		{
			name:        "keys",
			giveLimiter: newInspected(),
			giveKeys:    []string{"api.example.com", "fresh"},
			want: egress.Snapshot{Stats: egress.Stats{Sent: 2}, Keys: []throttle.KeyState{
				{Key: "api.example.com", Remaining: 0, Next: 250 * time.Millisecond, Ahead: 2, Paused: 500 * time.Millisecond},
				{Key: "fresh", Remaining: 10},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := egress.NewTransport(snapshotBase{}, egress.WithLimiter(tt.giveLimiter))
			sendTwo(t, tr)
			got, err := tr.Snapshot(context.Background(), tt.giveKeys...)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestTransportSnapshotErrors(t *testing.T) {
	errStore := errors.New("store down")
	tests := []struct {
		name        string
		giveLimiter throttle.Limiter
		wantErr     error
	}{
		{name: "not an Inspector", giveLimiter: uninspectedLimiter{}, wantErr: egress.ErrNoInspector},
		{name: "limiter fails", giveLimiter: &inspectedLimiter{err: errStore}, wantErr: errStore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := egress.NewTransport(snapshotBase{}, egress.WithLimiter(tt.giveLimiter))
			sendTwo(t, tr)
			got, err := tr.Snapshot(context.Background(), "k")
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, egress.Stats{Sent: 2}, got.Stats, "the counters come back even when a key cannot be read")
		})
	}
	_, err := egress.NewTransport(snapshotBase{}, egress.WithLimiter(&inspectedLimiter{err: errStore})).Snapshot(context.Background(), "k")
	assert.EqualError(t, err, `egress: inspecting key "k": store down`, "the error names the key")
}

func TestTransportSnapshotWithoutLimiter(t *testing.T) {
	tr := egress.NewTransport(snapshotBase{})
	_, err := tr.Snapshot(context.Background(), "k")
	assert.ErrorIs(t, err, egress.ErrNoInspector)
}

func TestSnapshotHandler(t *testing.T) {
	tests := []struct {
		name        string
		giveLimiter throttle.Limiter
		giveFixed   []string
		giveMethod  string
		giveQuery   string
		wantStatus  int
		wantBody    string
	}{
		{
			name:        "fixed and asked keys",
			giveLimiter: newInspected(),
			giveFixed:   []string{"api.example.com"},
			giveMethod:  http.MethodGet,
			giveQuery:   "?key=fresh",
			wantStatus:  http.StatusOK,
			wantBody: `{"in_flight":0,"waiting":0,"sent":0,"retries":0,"refused":0,"pauses":0,"keys":[` +
				`{"key":"api.example.com","remaining":0,"next_seconds":0.25,"ahead":2,"paused_seconds":0.5},` +
				`{"key":"fresh","remaining":10,"next_seconds":0,"ahead":0,"paused_seconds":0}]}` + "\n",
		},
		{
			name:        "no keys",
			giveLimiter: uninspectedLimiter{},
			giveMethod:  http.MethodGet,
			wantStatus:  http.StatusOK,
			wantBody:    `{"in_flight":0,"waiting":0,"sent":0,"retries":0,"refused":0,"pauses":0,"keys":[]}` + "\n",
		},
		{
			name:        "POST",
			giveLimiter: newInspected(),
			giveMethod:  http.MethodPost,
			wantStatus:  http.StatusMethodNotAllowed,
			wantBody:    "egress: snapshot answers GET only\n",
		},
		{
			name:        "too many keys",
			giveLimiter: newInspected(),
			giveFixed:   []string{"a"},
			giveMethod:  http.MethodGet,
			giveQuery:   "?key=" + strings.Repeat("k&key=", egress.MaxSnapshotKeys-1) + "k",
			wantStatus:  http.StatusBadRequest,
			wantBody:    "egress: snapshot asked for 101 keys, more than MaxSnapshotKeys (100)\n",
		},
		{
			name:        "not an Inspector",
			giveLimiter: uninspectedLimiter{},
			giveMethod:  http.MethodGet,
			giveQuery:   "?key=k",
			wantStatus:  http.StatusNotImplemented,
			wantBody:    "does not report its keys", // a limiter may add which part it is
		},
		{
			name:        "limiter fails",
			giveLimiter: &inspectedLimiter{err: errors.New("store down")},
			giveMethod:  http.MethodGet,
			giveQuery:   "?key=k",
			wantStatus:  http.StatusInternalServerError,
			wantBody:    "egress: inspecting key \"k\": store down\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := egress.SnapshotHandler(egress.NewTransport(snapshotBase{}, egress.WithLimiter(tt.giveLimiter)), tt.giveFixed...)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.giveMethod, "/debug/egress"+tt.giveQuery, nil))
			assert.Equal(t, tt.wantStatus, rec.Code)
			assert.Contains(t, rec.Body.String(), tt.wantBody)
		})
	}
}

func TestSnapshotHandlerKeepsItsKeys(t *testing.T) {
	keys := make([]string, 1, 4) // room to append into
	keys[0] = "api.example.com"
	h := egress.SnapshotHandler(egress.NewTransport(snapshotBase{}, egress.WithLimiter(newInspected())), keys...)
	for _, q := range []string{"?key=a", "?key=b"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+q, nil))
		require.Equal(t, http.StatusOK, rec.Code)
	}
	assert.Equal(t, []string{"api.example.com"}, keys)
}

func TestSnapshotHandlerNilPanics(t *testing.T) {
	assert.PanicsWithValue(t, "egress: SnapshotHandler given a nil *Transport", func() { egress.SnapshotHandler(nil) })
}

// TestSnapshotOfATokenBucket reads a real limiter's keys: one booked
// ahead, one paused, one fresh.
func TestSnapshotOfATokenBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, err := throttle.NewTokenBucket(throttle.PerSecond(10), 2)
		require.NoError(t, err)
		if _, ok := any(tb).(throttle.Inspector); !ok {
			t.Skip("throttle.TokenBucket does not report its keys (throttle.Inspector) on this branch yet")
		}
		ctx := context.Background()
		for range 4 {
			_, err := tb.Reserve(ctx, "api.example.com", 1, -1)
			require.NoError(t, err)
		}
		require.NoError(t, tb.Pause(ctx, "paused.example.com", 3*time.Second))
		tr := egress.NewTransport(snapshotBase{}, egress.WithLimiter(tb))
		got, err := tr.Snapshot(ctx, "api.example.com", "paused.example.com", "fresh.example.com")
		require.NoError(t, err)
		for i := range got.Keys {
			assert.GreaterOrEqual(t, got.Keys[i].Ahead, 0)
			got.Keys[i].Ahead = 0 // how a bucket counts units ahead is the limiter's to say
		}
		assert.Equal(t, []throttle.KeyState{
			{Key: "api.example.com", Remaining: 0, Next: 300 * time.Millisecond},
			{Key: "paused.example.com", Remaining: 0, Next: 3 * time.Second, Paused: 3 * time.Second},
			{Key: "fresh.example.com", Remaining: 2},
		}, got.Keys)
	})
}

func ExampleSnapshotHandler() {
	// A limiter that reports its keys (throttle.Inspector); the built-in
	// limiters do.
	tr := egress.NewTransport(snapshotBase{}, egress.WithLimiter(newInspected()))

	// Mount it where only operators can reach it.
	mux := http.NewServeMux()
	mux.Handle("GET /debug/egress", egress.SnapshotHandler(tr))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/debug/egress?key=api.example.com")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output:
	// {"in_flight":0,"waiting":0,"sent":0,"retries":0,"refused":0,"pauses":0,"keys":[{"key":"api.example.com","remaining":0,"next_seconds":0.25,"ahead":2,"paused_seconds":0.5}]}
}
