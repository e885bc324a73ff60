package redislimit

// Available reports whether Redis answers the Client now: false from a
// call that Redis could not answer until one succeeds again, while the
// circuit breaker turns calls away (all but a probe every
// [ProbeInterval]). On a Redis Cluster, each master node has a breaker
// of its own, and Available is false while any is open. It takes no
// lock, so a debug endpoint may call it on every request:
// [egress.Transport.Snapshot] reports it as the breaker's state.
//
// [egress.Transport.Snapshot]: https://pkg.go.dev/github.com/egress-go/egress#Transport.Snapshot
func (c *Client) Available() bool {
	ok := true
	c.eachBreaker(func(b *breaker) { ok = ok && !b.shut.Load() })
	return ok
}

// Available reports whether Redis answers the limiter's [Client] now; see
// [Client.Available]. Every limiter of this package has it.
func (b *budget) Available() bool { return b.client.Available() }
