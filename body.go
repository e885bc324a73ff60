package egress

import (
	"io"
	"net/http"
	"sync/atomic"
)

// maxDrain is how much of a discarded response's body is read before it
// is closed, so that its connection can be reused. A longer body is closed
// unread, which costs the connection, not a wait.
const maxDrain = 64 << 10

// releaseBody is a response body that gives back its request's queue slot
// when it is closed or read to the end, whichever comes first, exactly
// once. Read and Close may be called concurrently, as net/http allows.
type releaseBody struct {
	rc      io.ReadCloser
	release func()
	done    atomic.Bool
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.releaseOnce()
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.rc.Close()
	b.releaseOnce()
	return err
}

func (b *releaseBody) releaseOnce() {
	if b.done.CompareAndSwap(false, true) {
		b.release()
	}
}

// holdSlot makes resp's body release the queue slot, or releases it now
// when there is no body to hold it: a nil body, http.NoBody, or a 101
// Switching Protocols, whose body is the connection itself, which
// WebSocket clients type-assert to io.ReadWriteCloser.
func holdSlot(resp *http.Response, release func()) {
	if resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		release()
		return
	}
	resp.Body = &releaseBody{rc: resp.Body, release: release}
}

// discard drains a bounded amount of resp's body and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
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
