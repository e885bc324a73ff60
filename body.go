package egress

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
)

// maxDrain is how much of a response's body is read into memory before a
// retry: a discarded response is drained that far so that its connection
// can be reused, and a response set aside is kept in memory up to that
// size. The rest of a longer body is closed unread, which costs the
// connection, not a wait (see [ErrBodyCut]).
const maxDrain = 64 << 10

// releaseBody is a response body that gives back its request's queue slot
// when it is closed, read to EOF or fails on read, or when the request's
// context ends, whichever comes first, exactly once. Read and Close may be
// called concurrently, as net/http allows.
type releaseBody struct {
	rc   io.ReadCloser
	slot held
	stop func() bool // stops the context's AfterFunc, which releases slot; nil without one
	done atomic.Bool
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.releaseOnce()
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.rc.Close()
	b.releaseOnce()
	return err
}

// releaseOnce releases the slot on a path other than the context's end,
// unless the context ended first. Stopping the context's AfterFunc also
// drops the context's reference to the slot.
func (b *releaseBody) releaseOnce() {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if b.stop != nil && !b.stop() {
		return // the context ended first: its AfterFunc released the slot
	}
	b.slot.Release()
}

// holdSlot makes resp's body release the queue slot when it is closed,
// read to the end or fails, or when ctx ends. It releases the slot now when
// there is no body to hold it: a nil body, http.NoBody, a response that
// has no content whatever its Body (see bodiless), one that states an
// empty body (see empty), or a 101 Switching
// Protocols, whose body is the connection itself, which WebSocket clients
// type-assert to io.ReadWriteCloser.
func holdSlot(ctx context.Context, method string, resp *http.Response, slot held) {
	if resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols || bodiless(method, resp.StatusCode) || empty(resp) {
		slot.Release()
		return
	}
	b := &releaseBody{rc: resp.Body, slot: slot}
	if ctx.Done() != nil { // a context that never ends needs no AfterFunc, which costs 3 allocations with its func
		b.stop = context.AfterFunc(ctx, slot.Release)
	}
	resp.Body = b
}

// bodiless reports whether a response to method with status has no
// content (RFC 9110, 6.4.1): the answer to a HEAD, a 204 or a 304. Its
// stream has ended when the response arrives, so it holds nothing in
// flight. Over HTTP/1.1 net/http gives such a response http.NoBody; over
// HTTP/2 an empty body of its own, which held the slot until closed, so
// that a program that never closed the empty body of a HEAD or a 204
// leaked a slot per call over HTTP/2 only.
func bodiless(method string, status int) bool {
	return method == http.MethodHead || status == http.StatusNoContent || status == http.StatusNotModified
}

// empty reports whether resp states that its body is empty: its
// ContentLength is 0, as read from the wire. Over HTTP/1.1 net/http gives
// such a response http.NoBody; over HTTP/2 (a 200 with Content-Length: 0)
// a body of its own, which held the slot until closed, so that a program
// that never closed an empty body leaked a slot per call over HTTP/2
// only. Its Body is left as it is, and reads EOF and closes as before.
//
// ContentLength 0 counts as read from the wire when the response came
// over HTTP/2 or later, whose transports set -1 for a length they were
// not told, or when its Content-Length header says 0. A response built by
// hand (a mock, a cache) that left ContentLength at its zero value with a
// body to read keeps its slot until that body is done.
func empty(resp *http.Response) bool {
	return resp.ContentLength == 0 && (resp.ProtoMajor >= 2 || resp.Header.Get("Content-Length") == "0")
}

// setAside makes resp safe to hold while a retry is tried, and perhaps to
// return later: its body, up to maxDrain bytes, is read into memory, and
// closed, so that its connection is free for the retry. A longer body
// reads its first maxDrain bytes and then fails with [ErrBodyCut]; one
// that failed on read, what was read and then that error. Held open, a
// longer body kept its connection until the retry's answer came, and a
// base Transport with MaxConnsPerHost of 1 never sent the retry: the call
// hung until its context ended (found by a user's test).
func setAside(resp *http.Response) *http.Response {
	if resp.Body == nil || resp.Body == http.NoBody {
		return resp
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxDrain+1))
	_ = resp.Body.Close()
	switch {
	case err == nil && len(buf) <= maxDrain:
		resp.Body = io.NopCloser(bytes.NewReader(buf))
	case err == nil:
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf[:maxDrain]), failReader{ErrBodyCut}))
	default:
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), failReader{err}))
	}
	return resp
}

// failReader is a Reader that fails with err.
type failReader struct{ err error }

func (r failReader) Read([]byte) (int, error) { return 0, r.err }

// discard drains a bounded amount of resp's body and closes it. A nil resp
// is left alone.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
}

// closeBody closes a request body that will not be sent.
func closeBody(body io.ReadCloser) {
	if body != nil {
		_ = body.Close()
	}
}
