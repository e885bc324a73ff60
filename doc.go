// Package egress throttles outbound HTTP on the client side. Its
// [Transport] is an [http.RoundTripper] that wraps any [http.Client]: each
// request waits for a turn in a bounded queue, takes its cost from a
// per-key rate budget, backs off when the upstream says so, and pauses
// every caller of that budget, in every process that shares it, until the
// upstream is ready again.
//
// Most programs want [NewClient], or [NewTransport] around a transport of
// their own, with a limiter set to the upstream's published limit:
//
//	limit, err := throttle.NewTokenBucket(throttle.PerSecond(5), 5,
//		throttle.WithTolerance(throttle.DefaultTolerance))
//	if err != nil {
//		return err
//	}
//	client := egress.NewClient(
//		egress.WithLimiter(limit),
//		egress.WithRetry(retryafter.Policy{}),
//	)
//
// Responses and transport errors look exactly as they do without egress:
// every HTTP status, an upstream 429 included, comes back as (resp, nil).
// Requests the Transport refuses to send fail with errors that match
// [queue.ErrFull] or [throttle.ErrLimitExceeded].
//
// Budgets are keyed by the request's host unless [WithKey] says otherwise;
// [KeyByHeader] gives every API key its own budget. [WithRequestKey] and
// [WithRequestCost] set the key and the cost of one request through its
// context. For costs known only after the response, such as an LLM
// API's tokens, [WithEstimate] books an estimate per part and [Settle]
// settles it to the usage the response states. An [Observer] hears every wait, refusal, retry and pause, and
// [Transport.Stats] counts them; the package never logs.
//
// The limiters live in package throttle (in process) and
// throttle/redislimit (shared through Redis); the queue in package queue;
// the reading of Retry-After and quota headers, and the retry policy, in
// package retryafter.
package egress
