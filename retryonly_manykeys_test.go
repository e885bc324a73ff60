package egress_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// A Transport with WithRetry alone keeps its own record of what the
// upstreams state. A crawl of more hosts than the record holds, each of
// which answered 429 with a pause still running, filled it with live
// keys, and every new host was refused with ErrTooManyKeys: errors for a
// user who asked only for retries. The Transport's own record forgets
// its oldest key instead.
func TestRetryOnlyManyHostsNeverRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
			return respond(req, http.StatusTooManyRequests, "Retry-After", "60"), nil
		}}
		tr := egress.NewTransport(base, egress.WithRetry(retryafter.Policy{MaxAttempts: 1}))
		for i := range throttle.DefaultMaxKeys + 10 {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://h"+strconv.Itoa(i)+".test/", nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err, "host %d", i)
			resp.Body.Close()
		}
	})
}
