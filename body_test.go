package egress_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/retryafter"
	"github.com/egress-go/egress/throttle"
)

// rwBody is the body of a 101 response: the connection itself.
type rwBody struct{ trackedBody }

func (*rwBody) Write(p []byte) (int, error) { return len(p), nil }

func TestBodyReleasesTheSlot(t *testing.T) {
	tests := []struct {
		name          string
		giveResp      func(req *http.Request) *http.Response
		giveUse       func(t *testing.T, resp *http.Response)
		wantHeld      int // slots still held after giveUse
		wantUnwrapped bool
	}{
		{
			name:     "open",
			giveResp: func(req *http.Request) *http.Response { return respond(req, http.StatusOK) },
			giveUse:  func(*testing.T, *http.Response) {},
			wantHeld: 1,
		},
		{
			name:     "partly read",
			giveResp: func(req *http.Request) *http.Response { return respond(req, http.StatusOK) },
			giveUse: func(t *testing.T, resp *http.Response) {
				_, err := resp.Body.Read(make([]byte, 1))
				require.NoError(t, err)
			},
			wantHeld: 1,
		},
		{
			name:     "read to EOF, not closed",
			giveResp: func(req *http.Request) *http.Response { return respond(req, http.StatusOK) },
			giveUse: func(t *testing.T, resp *http.Response) {
				_, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
			},
		},
		{
			name:     "closed unread",
			giveResp: func(req *http.Request) *http.Response { return respond(req, http.StatusOK) },
			giveUse:  func(t *testing.T, resp *http.Response) { require.NoError(t, resp.Body.Close()) },
		},
		{
			name:     "read to EOF and closed twice",
			giveResp: func(req *http.Request) *http.Response { return respond(req, http.StatusOK) },
			giveUse: func(t *testing.T, resp *http.Response) {
				drainClose(t, resp)
				require.NoError(t, resp.Body.Close())
			},
		},
		{
			name: "nil body",
			giveResp: func(req *http.Request) *http.Response {
				return &http.Response{StatusCode: http.StatusNoContent, Request: req}
			},
			giveUse:       func(*testing.T, *http.Response) {},
			wantUnwrapped: true,
		},
		{
			name: "NoBody",
			giveResp: func(req *http.Request) *http.Response {
				return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}
			},
			giveUse:       func(*testing.T, *http.Response) {},
			wantUnwrapped: true,
		},
		{
			name: "101 Switching Protocols",
			giveResp: func(req *http.Request) *http.Response {
				return &http.Response{StatusCode: http.StatusSwitchingProtocols, Body: &rwBody{}, Request: req}
			},
			giveUse: func(t *testing.T, resp *http.Response) {
				_, ok := resp.Body.(io.ReadWriteCloser)
				assert.True(t, ok, "a WebSocket client can write to it")
			},
			wantUnwrapped: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent io.ReadCloser
			base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				resp := tt.giveResp(req)
				sent = resp.Body
				return resp, nil
			})
			q := newQueue(t, 1, 0)
			tr := egress.NewTransport(base, egress.WithQueue(q))

			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
			require.NoError(t, err)
			tt.giveUse(t, resp)

			assert.Equal(t, tt.wantHeld, q.Stats().InFlight)
			assert.Equal(t, tt.wantUnwrapped, resp.Body == sent)
		})
	}
}

func TestBodyCloseClosesTheBase(t *testing.T) {
	body := newTrackedBody("hello")
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: body}, nil
	})
	tr := egress.NewTransport(base, egress.WithQueue(newQueue(t, 1, 0)))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	require.NoError(t, err)

	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, resp.Body.Close())

	assert.Equal(t, "hello", string(got))
	assert.Equal(t, int32(2), body.closes.Load(), "every Close reaches the base's body")
}

// TestBodyReleaseUnderLoad sends 10 000 requests that end every way a
// request can end, from many goroutines, and checks that every slot comes
// back.
func TestBodyReleaseUnderLoad(t *testing.T) {
	const requests = 10_000
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Header.Get("X-Case") {
		case "error":
			return nil, errBase
		case "switch":
			return &http.Response{StatusCode: http.StatusSwitchingProtocols, Body: &rwBody{}, Request: req}, nil
		case "nil":
			return &http.Response{StatusCode: http.StatusOK, Request: req}, nil
		}
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("body")), Request: req}, nil
	})
	q := newQueue(t, 8, requests)
	tr := egress.NewTransport(base,
		egress.WithQueue(q),
		egress.WithLimiter(newTokenBucket(t, throttle.PerSecond(1_000_000_000), 1000)),
	)
	cases := []string{"read", "close", "read-close", "error", "cancel", "switch", "nil", "half-read-close"}

	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range jobs {
				sendCase(t, tr, cases[i%len(cases)])
			}
		})
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	stats := tr.Stats()
	assert.Equal(t, 0, stats.InFlight)
	assert.Equal(t, 0, stats.Waiting)
}

// sendCase sends one request through tr and ends it the way name says.
func sendCase(t *testing.T, tr *egress.Transport, name string) {
	ctx := context.Background()
	if name == "cancel" {
		ctx = cancelled()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
	if !assert.NoError(t, err) {
		return
	}
	req.Header.Set("X-Case", name)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		assert.Contains(t, []string{"error", "cancel"}, name)
		return
	}
	switch name {
	case "read":
		_, err = io.ReadAll(resp.Body)
	case "close", "switch":
		err = resp.Body.Close()
	case "read-close":
		_, err = io.ReadAll(resp.Body)
		err = errorsJoin(err, resp.Body.Close())
	case "half-read-close":
		_, err = resp.Body.Read(make([]byte, 2))
		err = errorsJoin(err, resp.Body.Close())
	}
	assert.NoError(t, err)
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// sliceBody is a body whose type cannot be compared with ==.
type sliceBody struct{ data []byte }

func (sliceBody) Read([]byte) (int, error) { return 0, io.EOF }
func (sliceBody) Close() error             { return nil }

func TestUncomparableBodies(t *testing.T) {
	base := &fakeBase{answer: func(req *http.Request, n int) (*http.Response, error) {
		resp := respond(req, http.StatusOK)
		if n == 0 {
			resp.StatusCode = http.StatusTooManyRequests
		}
		resp.Body = sliceBody{data: []byte("x")}
		return resp, nil
	}}
	tr := egress.NewTransport(base, egress.WithQueue(newQueue(t, 1, 0)), egress.WithRetry(retryafter.Policy{Backoff: func(int) time.Duration { return 0 }}))
	req := newRequest(t, context.Background(), http.MethodPut, "http://api.test/", nil)
	req.Body = sliceBody{data: []byte("payload")}
	req.GetBody = func() (io.ReadCloser, error) { return sliceBody{data: []byte("payload")}, nil }

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drainClose(t, resp)

	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 0, tr.Stats().InFlight)
}

// TestContextEndReleasesTheSlot holds a response without ever closing its
// body, and ends the request's context: the slot comes back, once, and the
// next request gets it.
func TestContextEndReleasesTheSlot(t *testing.T) {
	tests := []struct {
		name string
		// giveSend sends one request through tr, and returns its response
		// once the request's context has ended.
		giveSend func(t *testing.T, tr *egress.Transport) *http.Response
	}{
		{
			name: "cancelled",
			giveSend: func(t *testing.T, tr *egress.Transport) *http.Response {
				ctx, cancel := context.WithCancel(context.Background())
				resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
				require.NoError(t, err)
				cancel()
				return resp
			},
		},
		{
			name: "deadline",
			giveSend: func(t *testing.T, tr *egress.Transport) *http.Response {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
				require.NoError(t, err)
				time.Sleep(2 * time.Second)
				return resp
			},
		},
		{
			name: "http.Client.Timeout",
			giveSend: func(t *testing.T, tr *egress.Transport) *http.Response {
				client := &http.Client{Transport: tr, Timeout: time.Second}
				resp, err := client.Get("http://api.test/")
				require.NoError(t, err)
				time.Sleep(2 * time.Second)
				return resp
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var bodies []*trackedBody
				base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					resp := respond(req, http.StatusOK)
					bodies = append(bodies, resp.Body.(*trackedBody))
					return resp, nil
				})
				q := newQueue(t, 1, 0)
				tr := egress.NewTransport(base, egress.WithQueue(q))

				held := tt.giveSend(t, tr)
				synctest.Wait()
				require.Equal(t, 0, q.Stats().InFlight, "the context's end gave the slot back")

				next, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
				require.NoError(t, err, "the next request gets the slot")
				require.NoError(t, held.Body.Close())
				assert.Equal(t, 1, q.Stats().InFlight, "a late Close does not free the next request's slot")
				drainClose(t, next)
				assert.Equal(t, 0, q.Stats().InFlight)
				assert.Equal(t, int32(1), bodies[0].closes.Load(), "Close still reaches the base's body")
			})
		})
	}
}

// failingBody fails every Read.
type failingBody struct{ trackedBody }

func (*failingBody) Read([]byte) (int, error) { return 0, errBase }

func TestBodyReadErrorReleasesTheSlot(t *testing.T) {
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: &failingBody{}, Request: req}, nil
	})
	q := newQueue(t, 1, 0)
	tr := egress.NewTransport(base, egress.WithQueue(q))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	require.NoError(t, err)

	_, err = resp.Body.Read(make([]byte, 8))

	assert.ErrorIs(t, err, errBase)
	assert.Equal(t, 0, q.Stats().InFlight, "a failed read gives the slot back, unclosed")
}

// releaseCounter is a queue.Interface that hands out any number of slots
// and counts every call of every release func, so that a second release
// shows, which a queue.Queue would absorb.
type releaseCounter struct {
	acquired, released atomic.Int32
}

func (q *releaseCounter) Acquire(context.Context) (func(), error) {
	release, _ := q.TryAcquire()
	return release, nil
}

func (q *releaseCounter) TryAcquire() (func(), bool) {
	q.acquired.Add(1)
	return func() { q.released.Add(1) }, true
}

func (q *releaseCounter) Stats() queue.Stats {
	return queue.Stats{InFlight: int(q.acquired.Load() - q.released.Load())}
}

// TestSlotReleasedExactlyOnce ends a response every way it can end, in
// several orders: the release func runs once, whatever comes after.
func TestSlotReleasedExactlyOnce(t *testing.T) {
	read := func(t *testing.T, resp *http.Response, _ context.CancelFunc) {
		_, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
	}
	closeBody := func(t *testing.T, resp *http.Response, _ context.CancelFunc) {
		require.NoError(t, resp.Body.Close())
	}
	cancel := func(_ *testing.T, _ *http.Response, cancel context.CancelFunc) { cancel() }
	tests := []struct {
		name     string
		giveEnds []func(t *testing.T, resp *http.Response, cancel context.CancelFunc)
	}{
		{name: "close, cancel", giveEnds: []func(*testing.T, *http.Response, context.CancelFunc){closeBody, cancel}},
		{name: "cancel, close", giveEnds: []func(*testing.T, *http.Response, context.CancelFunc){cancel, closeBody}},
		{name: "EOF, close, cancel", giveEnds: []func(*testing.T, *http.Response, context.CancelFunc){read, closeBody, cancel}},
		{name: "cancel, EOF, close", giveEnds: []func(*testing.T, *http.Response, context.CancelFunc){cancel, read, closeBody}},
		{name: "close twice", giveEnds: []func(*testing.T, *http.Response, context.CancelFunc){closeBody, closeBody}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := &releaseCounter{}
				tr := egress.NewTransport(&fakeBase{}, egress.WithQueue(q))
				ctx, cancelCtx := context.WithCancel(context.Background())
				defer cancelCtx()
				resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://api.test/", nil))
				require.NoError(t, err)

				for _, end := range tt.giveEnds {
					end(t, resp, cancelCtx)
					synctest.Wait()
				}

				assert.Equal(t, int32(1), q.acquired.Load())
				assert.Equal(t, int32(1), q.released.Load())
			})
		})
	}
}

// TestPanicReleasesTheSlot checks that a panic under RoundTrip (here in
// the base RoundTripper) gives the queue slot back as it unwinds.
func TestPanicReleasesTheSlot(t *testing.T) {
	q := newQueue(t, 1, 0)
	var calls atomic.Int32
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return respond(req, http.StatusOK), nil
	})
	tr := egress.NewTransport(base, egress.WithQueue(q))
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_, _ = tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	}()
	assert.Zero(t, q.Stats().InFlight, "the slot came back")
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
	require.NoError(t, err)
	drainClose(t, resp)
}
