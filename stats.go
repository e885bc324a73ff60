package egress

// Stats is a snapshot of a [Transport]'s counters. The counts are taken
// one by one, so under load they may be a few requests apart.
type Stats struct {
	// InFlight is the number of queue slots held: requests inside
	// RoundTrip or whose response body is still open. It is 0 without
	// [WithQueue].
	InFlight int
	// Waiting is the number of requests waiting in line for a queue slot.
	Waiting int
	// Sent is the number of attempts handed to the base RoundTripper,
	// retries included.
	Sent uint64
	// Retries is the number of retries begun: responses set aside to try
	// again, including those returned after all when the retry could not
	// be made.
	Retries uint64
	// Refused is the number of attempts the Transport refused to send:
	// queue full, limit exceeded, or limiter error. A refused retry counts
	// too, although RoundTrip then returns the response that the retry
	// was for (as [Observer].Refused reports it).
	Refused uint64
	// Pauses is the number of times a response paused its key.
	Pauses uint64
}

// Stats returns a snapshot of t's counters.
func (t *Transport) Stats() Stats {
	s := Stats{
		Sent:    t.sent.Load(),
		Retries: t.retries.Load(),
		Refused: t.refused.Load(),
		Pauses:  t.pauses.Load(),
	}
	if t.queue != nil {
		q := t.queue.Stats()
		s.InFlight, s.Waiting = q.InFlight, q.Waiting
	}
	return s
}
