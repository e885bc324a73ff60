package egress_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
)

// A refused response set aside for a retry gives its connection back
// before the retry is sent, whatever its body's length: held open, a body
// of 64 KiB or more kept it, and a base Transport allowed one connection
// per host never sent the retry (the call hung until its context ended).
func TestSetAsideFreesTheConnection(t *testing.T) {
	for _, size := range []int{1 << 10, 64<<10 - 1, 64 << 10, 100 << 10} {
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hits.Add(1) == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write(bytes.Repeat([]byte("e"), size))
				return
			}
			_, _ = io.WriteString(w, "ok")
		}))
		base := &http.Transport{MaxConnsPerHost: 1}
		client := &http.Client{Transport: egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))}
		// A bound for a hang, not a timing assertion: the retry goes at once.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err, "a %d-byte refusal", size)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusOK, resp.StatusCode, "a %d-byte refusal: the retry's answer", size)
		assert.Equal(t, "ok", string(body))
		assert.EqualValues(t, 2, hits.Load(), "a %d-byte refusal", size)
		cancel()
		base.CloseIdleConnections()
		srv.Close()
	}
}

// A response set aside and then returned after all (here the retry's
// own attempt failed) reads as it came, up to 64 KiB; a longer body then
// fails with ErrBodyCut, never a silent end.
func TestSetAsideReturnedAfterAll(t *testing.T) {
	for _, tc := range []struct {
		size    int
		wantErr error
	}{
		{size: 0},
		{size: 64 << 10},
		{size: 64<<10 + 1, wantErr: egress.ErrBodyCut},
		{size: 1 << 20, wantErr: egress.ErrBodyCut},
	} {
		page := bytes.Repeat([]byte("e"), tc.size)
		var calls atomic.Int32
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if calls.Add(1) > 1 {
				return nil, errors.New("connection refused")
			}
			resp := respond(req, http.StatusTooManyRequests, "Retry-After", "0")
			resp.Body = io.NopCloser(bytes.NewReader(page))
			return resp, nil
		})
		tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{}))
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.example/", nil))
		require.NoError(t, err, "a response that arrived is never turned into an error")
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		if tc.wantErr == nil {
			require.NoError(t, err, "%d bytes", tc.size)
			assert.Equal(t, page, got, "%d bytes", tc.size)
			continue
		}
		require.ErrorIs(t, err, tc.wantErr, "%d bytes", tc.size)
		assert.Equal(t, page[:64<<10], got, "%d bytes: the first 64 KiB", tc.size)
	}
}
