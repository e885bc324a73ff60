package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/retryafter"
)

// TestObserverSent checks that Sent hears every attempt the base answers,
// retries included, with its status or error and how long the base took,
// and that it is called without a limiter, queue or retry too.
func TestObserverSent(t *testing.T) {
	errDown := errors.New("connection refused")
	tests := []struct {
		name     string
		giveOpts []egress.Option
		giveBase func(req *http.Request, n int) (*http.Response, error)
		wantErr  error
		wantSent []egress.SentInfo
	}{
		{
			name:     "retry after a 429",
			giveOpts: []egress.Option{egress.WithRetry(retryafter.Policy{Jitter: zeroJitter})},
			giveBase: func(req *http.Request, n int) (*http.Response, error) {
				time.Sleep(time.Duration(n+1) * 100 * time.Millisecond)
				if n == 0 {
					return respond(req, http.StatusTooManyRequests, "Retry-After", "0"), nil
				}
				return respond(req, http.StatusOK), nil
			},
			wantSent: []egress.SentInfo{
				{Key: "api.test", Attempt: 1, StatusCode: 429, Duration: 100 * time.Millisecond},
				{Key: "api.test", Attempt: 2, StatusCode: 200, Duration: 200 * time.Millisecond},
			},
		},
		{
			name: "no limiter, queue or retry",
			giveBase: func(req *http.Request, n int) (*http.Response, error) {
				time.Sleep(50 * time.Millisecond)
				return respond(req, http.StatusNoContent), nil
			},
			wantSent: []egress.SentInfo{{Key: "api.test", Attempt: 1, StatusCode: 204, Duration: 50 * time.Millisecond}},
		},
		{
			name: "base fails",
			giveBase: func(req *http.Request, n int) (*http.Response, error) {
				return nil, errDown
			},
			wantErr:  errDown,
			wantSent: []egress.SentInfo{{Key: "api.test", Attempt: 1, Err: errDown}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent []egress.SentInfo
				opts := append(tt.giveOpts, egress.WithObserver(&egress.Observer{
					Sent: func(i egress.SentInfo) {
						assert.NotNil(t, i.Request)
						i.Request = nil // compared apart
						sent = append(sent, i)
					},
				}))
				tr := egress.NewTransport(&fakeBase{answer: tt.giveBase}, opts...)

				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
				if err == nil {
					drainClose(t, resp)
				}

				assert.ErrorIs(t, err, tt.wantErr)
				assert.Equal(t, tt.wantSent, sent)
			})
		})
	}
}

// TestObserverSentRequest checks that Sent is given the request that was
// sent.
func TestObserverSentRequest(t *testing.T) {
	var got *http.Request
	tr := egress.NewTransport(&fakeBase{}, egress.WithObserver(&egress.Observer{
		Sent: func(i egress.SentInfo) { got = i.Request },
	}))
	req := newRequest(t, context.Background(), http.MethodPost, "http://api.test/v1", nil)

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drainClose(t, resp)

	require.NotNil(t, got)
	assert.Equal(t, "POST http://api.test/v1", got.Method+" "+got.URL.String())
}

// Sent hears each attempt on the wire: here a 429 answered with
// Retry-After: 0, then its retry. Attempt-1 is OpenTelemetry's
// http.request.resend_count.
func ExampleObserver_sent() {
	var throttled atomic.Bool
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if throttled.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer api.Close()

	client := egress.NewClient(
		egress.WithRetry(retryafter.Policy{}),
		egress.WithObserver(&egress.Observer{
			Sent: func(s egress.SentInfo) {
				fmt.Printf("attempt %d: %d (resend_count %d)\n", s.Attempt, s.StatusCode, s.Attempt-1)
			},
		}),
	)
	resp, err := client.Get(api.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output:
	// attempt 1: 429 (resend_count 0)
	// attempt 2: 200 (resend_count 1)
	// ok
}
