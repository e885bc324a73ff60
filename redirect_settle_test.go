package egress_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/throttle"
)

// TestRedirectHopsKeepTheirEstimate: through an http.Client that follows
// a redirect, each hop is booked at its estimate, and Settle on the
// response the Client returns settles the last hop only. The redirect's
// estimate stays booked (40 of 100 units for one call that cost 1) unless
// the program settles it in CheckRedirect, as Settle's doc says.
func TestRedirectHopsKeepTheirEstimate(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, settleRedirect := range []bool{false, true} {
		l, err := throttle.NewTokenBucket(throttle.PerHour(1), 100)
		require.NoError(t, err)
		c := &http.Client{Transport: egress.NewTransport(srv.Client().Transport, egress.WithLimiter(l),
			egress.WithEstimate(func(*http.Request) ([]int, error) { return []int{40}, nil }))}
		if settleRedirect {
			c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
				return egress.Settle(req.Response, 0)
			}
		}
		resp, err := c.Get(srv.URL + "/old")
		require.NoError(t, err)
		drainClose(t, resp)
		require.NoError(t, egress.Settle(resp, 1))
		c.CloseIdleConnections()

		st, err := l.Inspect(context.Background(), srv.Listener.Addr().String())
		require.NoError(t, err)
		if settleRedirect {
			assert.Equal(t, 99, st.Remaining, "the redirect settled at 0, the call at 1")
		} else {
			assert.Equal(t, 59, st.Remaining, "the redirect keeps its estimate")
		}
	}
}
