package throttle

// forgetOption carries [WithForget].
type forgetOption struct{}

func (forgetOption) apply(*config) {}

// WithForget makes a full [Upstream] record forget a live key to make
// room for a new one, instead of refusing the new key with
// [ErrTooManyKeys]: of the keys it looks at (a few, from a random place,
// as between its sweeps), the one answered longest ago. What a forgotten
// key's statements and pause held back is no longer held: its next
// requests may meet the upstream's refusals, which the record then
// learns again. The record a Transport of package egress keeps of its
// own (with WithRetry, when no WithUpstream gave one) is built with it,
// so that a user who never asked for a record never has a request
// refused because many hosts were crawled. Other limiters ignore it.
func WithForget() Option { return forgetOption{} }

// forget drops the key answered longest ago among up to dropSample keys,
// from the random place where ranging over a map starts. u.mu is held.
func (u *Upstream) forget() {
	var (
		oldest string
		at     int64
		seen   int
	)
	for key, k := range u.keys {
		if seen == 0 || k.answered < at {
			oldest, at = key, k.answered
		}
		if seen++; seen >= dropSample {
			break
		}
	}
	if seen > 0 {
		delete(u.keys, oldest)
	}
}
