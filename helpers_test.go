package egress_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeBase is a base RoundTripper that answers from a func, records when
// each request reached it, and closes every request body it is given, as
// the RoundTripper contract requires.
type fakeBase struct {
	answer  func(req *http.Request, n int) (*http.Response, error)
	latency time.Duration // slept before answering

	mu    sync.Mutex
	sent  []time.Time
	reqs  []*http.Request
	idles int
}

func (f *fakeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	n := len(f.sent)
	f.sent = append(f.sent, time.Now())
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	if f.latency > 0 {
		timer := time.NewTimer(f.latency)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if f.answer == nil {
		return respond(req, http.StatusOK), nil
	}
	return f.answer(req, n)
}

func (f *fakeBase) CloseIdleConnections() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idles++
}

// times returns when each request reached the base.
func (f *fakeBase) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time{}, f.sent...)
}

func (f *fakeBase) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}

// roundTripFunc adapts a func to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// respond returns a response to req with status and header pairs, whose
// body is a trackedBody reading "ok".
func respond(req *http.Request, status int, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     h,
		Body:       newTrackedBody("ok"),
		Request:    req,
	}
}

// trackedBody is a body that counts its Closes and the bytes read from it.
type trackedBody struct {
	r      io.Reader
	read   atomic.Int64
	closes atomic.Int32
}

func newTrackedBody(s string) *trackedBody {
	return &trackedBody{r: strings.NewReader(s)}
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error {
	b.closes.Add(1)
	return nil
}

// newRequest returns a GET request for url with ctx.
func newRequest(t testing.TB, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	require.NoError(t, err)
	return req
}

// unreplayable returns a request whose body is tracked and cannot be
// replayed: it has no GetBody.
func unreplayable(t testing.TB, ctx context.Context, method string) (*http.Request, *trackedBody) {
	t.Helper()
	body := newTrackedBody("payload")
	req := newRequest(t, ctx, method, "http://api.test/v1", nil)
	req.Body = body
	req.ContentLength = int64(len("payload"))
	return req, body
}

// replayable returns a request with a body that GetBody replays.
func replayable(t testing.TB, ctx context.Context, method string) *http.Request {
	t.Helper()
	return newRequest(t, ctx, method, "http://api.test/v1", bytes.NewReader([]byte("payload")))
}

func newTokenBucket(t testing.TB, r throttle.Rate, burst int) *throttle.TokenBucket {
	t.Helper()
	l, err := throttle.NewTokenBucket(r, burst)
	require.NoError(t, err)
	return l
}

func newQueue(t testing.TB, inFlight, waiting int) *queue.Queue {
	t.Helper()
	q, err := queue.New(inFlight, waiting)
	require.NoError(t, err)
	return q
}

// drainClose reads resp's body to the end and closes it.
func drainClose(t testing.TB, resp *http.Response) {
	t.Helper()
	_, err := io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
}

// recordingLimiter is a Limiter that records each Reserve and grants it
// at once.
type recordingLimiter struct {
	mu    sync.Mutex
	keys  []string
	costs []int
}

func (l *recordingLimiter) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
	l.costs = append(l.costs, n)
	return &throttle.Reservation{OK: true}, nil
}

// errBase is what a failing base RoundTripper returns.
var errBase = errors.New("base: connection refused")

// zeroJitter makes retry delays deterministic.
func zeroJitter(time.Duration) time.Duration { return 0 }

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
