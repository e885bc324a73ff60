package egress_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
)

// TestBodilessResponsesFreeTheSlotOverHTTP2: a HEAD, a 204 and a 304
// have no content (RFC 9110), and over HTTP/1.1 net/http answers them
// with http.NoBody, which frees the queue slot at once. Over HTTP/2 it
// answers them with a body of its own that is not http.NoBody, and the
// slot stayed held until that body was closed: a program that never
// closes the empty body of a HEAD or a 204 (harmless without egress)
// leaked a slot per call over HTTP/2 only, until its queue refused
// everything.
func TestBodilessResponsesFreeTheSlotOverHTTP2(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/304", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) })
	mux.HandleFunc("/head", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("a body a GET would get")) })
	h1 := httptest.NewServer(mux)
	defer h1.Close()
	h2 := httptest.NewUnstartedServer(mux)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()

	for name, srv := range map[string]*httptest.Server{"HTTP/1.1": h1, "HTTP/2": h2} {
		t.Run(name, func(t *testing.T) {
			q := newQueue(t, 1, 0) // one in flight, nobody waits: a held slot refuses the next call
			c := &http.Client{Transport: egress.NewTransport(srv.Client().Transport, egress.WithQueue(q))}
			defer c.CloseIdleConnections()
			for _, call := range []struct{ method, path string }{
				{http.MethodGet, "/204"}, {http.MethodGet, "/304"}, {http.MethodHead, "/head"},
			} {
				req, err := http.NewRequest(call.method, srv.URL+call.path, nil)
				require.NoError(t, err)
				resp, err := c.Do(req) //nolint:bodyclose // the point: never closed
				require.NoError(t, err, "%s %s", call.method, call.path)
				assert.Equal(t, 0, q.Stats().InFlight, "%s %s %s: nothing is in flight", resp.Proto, call.method, call.path)
			}
		})
	}
}

// TestEmptyBodyFreesTheSlotOverHTTP2: a 200 with Content-Length: 0 has
// nothing to read. Over HTTP/1.1 net/http answers it with http.NoBody,
// which frees the queue slot at once; over HTTP/2 with a body of its own,
// and the slot stayed held until that body was closed. Freed at once, the
// body still reads EOF and closes, and the slot is not released twice.
func TestEmptyBodyFreesTheSlotOverHTTP2(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "0")
	})
	mux.HandleFunc("/flushed", func(w http.ResponseWriter, r *http.Request) {
		// The headers go out before the handler ends: over HTTP/2 the
		// stream ends in a frame of its own, after the response arrived.
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
	})
	h1 := httptest.NewServer(mux)
	defer h1.Close()
	h2 := httptest.NewUnstartedServer(mux)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()

	tests := []struct {
		name     string
		giveSrv  *httptest.Server
		givePath string
	}{
		{name: "HTTP/1.1", giveSrv: h1, givePath: "/empty"},
		{name: "HTTP/1.1 flushed", giveSrv: h1, givePath: "/flushed"},
		{name: "HTTP/2", giveSrv: h2, givePath: "/empty"},
		{name: "HTTP/2 flushed", giveSrv: h2, givePath: "/flushed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(t, 1, 0) // one in flight, nobody waits: a held slot refuses the next call
			c := &http.Client{Transport: egress.NewTransport(tt.giveSrv.Client().Transport, egress.WithQueue(q))}
			defer c.CloseIdleConnections()

			never, err := c.Get(tt.giveSrv.URL + tt.givePath) //nolint:bodyclose // the point: never closed
			require.NoError(t, err)
			require.Equal(t, int64(0), never.ContentLength)
			assert.Equal(t, 0, q.Stats().InFlight, "%s: nothing is in flight", never.Proto)

			resp, err := c.Get(tt.giveSrv.URL + tt.givePath)
			require.NoError(t, err, "the slot came back")
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Empty(t, body)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, 0, q.Stats().InFlight, "released once, not twice")
		})
	}
}
