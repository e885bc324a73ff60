package egress_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// Each attempt of a retried POST carries the whole body, also when the
// server read only part of the first one before answering 429.
func TestRetryReplaysTheBody(t *testing.T) {
	payload := strings.Repeat("0123456789", 10_000) // 100 kB
	var mu sync.Mutex
	var got []string
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			buf := make([]byte, 10)
			_, _ = io.ReadFull(r.Body, buf)
			mu.Lock()
			got = append(got, string(buf))
			mu.Unlock()
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(strings.Repeat("x", 100_000)))
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	tb, err := throttle.NewTokenBucket(throttle.PerSecond(100), 10)
	require.NoError(t, err)
	for _, body := range []struct {
		name string
		r    func() io.Reader
	}{
		{"bytes.Reader", func() io.Reader { return bytes.NewReader([]byte(payload)) }},
		{"strings.Reader", func() io.Reader { return strings.NewReader(payload) }},
		{"bytes.Buffer", func() io.Reader { return bytes.NewBufferString(payload) }},
	} {
		t.Run(body.name, func(t *testing.T) {
			mu.Lock()
			n, got = 0, nil
			mu.Unlock()
			client := egress.NewClient(egress.WithLimiter(tb), egress.WithRetry(retryafter.Policy{}))
			defer client.CloseIdleConnections()
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1", body.r())
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "ok", string(b))
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, got, 2)
			assert.Equal(t, payload, got[1])
		})
	}
}
