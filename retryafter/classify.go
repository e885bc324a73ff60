package retryafter

import (
	"net/http"
	"time"
)

// StatusOverloaded is 529, which Anthropic answers when its API is
// overloaded. net/http has no name for it.
const StatusOverloaded = 529

// Throttled reports whether resp is the upstream telling the client to slow
// down, as opposed to failing. It is:
//
//   - a 429 Too Many Requests;
//   - a 503 Service Unavailable with a valid Retry-After or retry-after-ms;
//   - a 529 (Anthropic's overloaded_error);
//   - a 403 Forbidden with a valid Retry-After or retry-after-ms, or whose
//     quota headers say remaining is 0 (GitHub's primary and secondary rate
//     limits).
//
// A plain 403 is an authorization failure, and a plain 503 an outage: neither
// is throttling. A nil resp is not throttling.
//
// Throttled is independent of [Policy.Statuses], which lists the statuses
// that [Policy.Next] retries; it decides whether [Policy.Pause] may pause a
// key on the response's Retry-After.
func Throttled(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, StatusOverloaded:
		return true
	case http.StatusServiceUnavailable:
		return scan(resp.Header).hasRetryAfter()
	case http.StatusForbidden:
		f := scan(resp.Header)
		return f.hasRetryAfter() || f.exhausted()
	}
	return false
}

// hasRetryAfter reports whether f carries a valid Retry-After or
// retry-after-ms.
func (f fields) hasRetryAfter() bool {
	_, ok := f.retryAfter(time.Time{})
	return ok
}
