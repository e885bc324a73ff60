package retryafter_test

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/egress-go/egress/retryafter"
)

func ExampleParseValue() {
	// 30 seconds before RFC 9110's example date.
	now := time.Date(1994, time.November, 6, 8, 49, 7, 0, time.UTC)
	for _, v := range []string{
		"120",
		"2.0",
		"Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT",
		"Sun Nov  6 08:49:37 1994",
		"9223372036854775807",
		"-5",
	} {
		d, err := retryafter.ParseValue(v, now)
		fmt.Println(d, err)
	}
	// Output:
	// 2m0s <nil>
	// 2s <nil>
	// 30s <nil>
	// 30s <nil>
	// 30s <nil>
	// 744h0m0s <nil>
	// 0s retryafter: invalid Retry-After value "-5"
}

func ExampleParse() {
	// GitHub's primary rate limit, answered by a server whose clock reads
	// 17:27:06 while ours is five minutes fast. The Date header cancels the
	// skew.
	h := http.Header{}
	h.Set("Date", "Mon, 01 Jul 2013 17:27:06 GMT")
	h.Set("X-RateLimit-Limit", "60")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "1372700873")
	now := time.Date(2013, time.July, 1, 17, 32, 6, 0, time.UTC)

	fmt.Println(retryafter.Parse(h, now))

	// With requests to spare, the same reset is no reason to wait.
	h.Set("X-RateLimit-Remaining", "56")
	fmt.Println(retryafter.Parse(h, now))
	// Output:
	// 20m47s true
	// 0s false
}

func ExampleParseQuota() {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "60")
	h.Set("x-ratelimit-limit-tokens", "150000")
	h.Set("x-ratelimit-remaining-requests", "59")
	h.Set("x-ratelimit-remaining-tokens", "149984")
	h.Set("x-ratelimit-reset-requests", "1s")
	h.Set("x-ratelimit-reset-tokens", "6m0s")

	for _, q := range retryafter.ParseQuota(h, time.Now()) {
		fmt.Printf("%s: %d of %d left, full again in %v\n", q.Name, q.Remaining, q.Limit, q.Reset)
	}
	// Output:
	// requests: 59 of 60 left, full again in 1s
	// tokens: 149984 of 150000 left, full again in 6m0s
}

func ExampleThrottled() {
	forbidden := &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{}}
	fmt.Println(retryafter.Throttled(forbidden))

	forbidden.Header.Set("X-RateLimit-Remaining", "0")
	fmt.Println(retryafter.Throttled(forbidden))
	// Output:
	// false
	// true
}

func ExamplePolicy_Next() {
	p := retryafter.Policy{
		// No jitter, so that the output is stable. Leave Jitter nil in
		// production.
		Jitter: func(time.Duration) time.Duration { return 0 },
	}
	now := time.Now()
	get, _ := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
	post, _ := http.NewRequest(http.MethodPost, "https://api.example.com/items", strings.NewReader(`{"name":"x"}`))

	tooMany := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}}
	fmt.Println(p.Next(get, tooMany, 1, now))
	fmt.Println(p.Next(post, tooMany, 1, now)) // a 429 was not processed: safe to resend
	fmt.Println(p.Next(get, tooMany, 4, now))  // the fourth attempt was the last

	unavailable := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}}
	fmt.Println(p.Next(get, unavailable, 1, now)) // no server delay: local backoff
	fmt.Println(p.Next(post, unavailable, 1, now))

	tooLong := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}}
	fmt.Println(p.Next(get, tooLong, 1, now)) // over MaxDelay: hand the 429 back
	// Output:
	// 2s true
	// 2s true
	// 0s false
	// 50ms true
	// 0s false
	// 0s false
}

func ExamplePolicy_Pause() {
	var p retryafter.Policy
	now := time.Now()

	// A 200 that spent the last request of the window pauses the key.
	spent := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}}
	spent.Header.Set("RateLimit", `"default";r=0;t=12`)
	fmt.Println(p.Pause(spent, now))

	// A 429 asking for two hours pauses it for MaxPause at most.
	tooMany := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}}
	tooMany.Header.Set("Retry-After", "7200")
	fmt.Println(p.Pause(tooMany, now))
	// Output:
	// 12s true
	// 1m0s true
}
