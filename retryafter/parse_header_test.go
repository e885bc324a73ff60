package retryafter_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/retryafter"
)

type parseTest struct {
	name      string
	giveH     http.Header
	giveNow   time.Time
	wantDelay time.Duration
	wantOK    bool
}

// skews are client clocks that are off from the server's.
var skews = []time.Duration{0, 5 * time.Minute, -5 * time.Minute}

func parseTests() []parseTest {
	tests := []parseTest{
		// Nothing to read.
		{name: "nil header", giveH: nil},
		{name: "empty header", giveH: http.Header{}},
		{name: "unrelated headers", giveH: header("Content-Type", "application/json", "Date", serverDate)},

		// Retry-After.
		{name: "Retry-After seconds", giveH: header("Retry-After", "120"), wantDelay: 120 * time.Second, wantOK: true},
		{name: "Retry-After zero", giveH: header("Retry-After", "0"), wantDelay: 0, wantOK: true},
		{name: "Shopify 429", giveH: header("Retry-After", "2.0", "X-Shopify-Shop-Api-Call-Limit", "40/40"), wantDelay: 2 * time.Second, wantOK: true},
		{name: "Retry-After huge", giveH: header("Retry-After", "9223372036854775807"), wantDelay: retryafter.MaxDelayValue, wantOK: true},
		{name: "Retry-After 484289h", giveH: header("Retry-After", "1743440400"), wantDelay: retryafter.MaxDelayValue, wantOK: true},
		{name: "Retry-After invalid", giveH: header("Retry-After", "soon")},
		{name: "Retry-After negative", giveH: header("Retry-After", "-5")},
		{name: "Retry-After duplicates take the longest", giveH: header("Retry-After", "5", "Retry-After", "30"), wantDelay: 30 * time.Second, wantOK: true},
		{name: "Retry-After duplicates in other order", giveH: header("Retry-After", "30", "Retry-After", "5"), wantDelay: 30 * time.Second, wantOK: true},
		{name: "Retry-After duplicates are not summed", giveH: header("Retry-After", "30", "Retry-After", "30"), wantDelay: 30 * time.Second, wantOK: true},
		{name: "Retry-After invalid duplicate skipped", giveH: header("Retry-After", "abc", "Retry-After", "5"), wantDelay: 5 * time.Second, wantOK: true},
		{name: "Retry-After list is invalid", giveH: header("Retry-After", "5, 30")},
		{
			name:      "Retry-After date from Date",
			giveH:     header("Date", serverDate, "Retry-After", "Mon, 01 Jul 2013 17:28:06 GMT"),
			giveNow:   serverNow,
			wantDelay: time.Minute, wantOK: true,
		},
		{
			name:      "Retry-After date without Date uses now",
			giveH:     header("Retry-After", "Mon, 01 Jul 2013 17:28:06 GMT"),
			giveNow:   serverNow.Add(20 * time.Second),
			wantDelay: 40 * time.Second, wantOK: true,
		},
		{
			name:      "Retry-After date in the past",
			giveH:     header("Date", serverDate, "Retry-After", "Mon, 01 Jul 2013 17:26:06 GMT"),
			giveNow:   serverNow,
			wantDelay: 0, wantOK: true,
		},
		{
			name:      "invalid Date falls back to now",
			giveH:     header("Date", "yesterday", "Retry-After", "Mon, 01 Jul 2013 17:28:06 GMT"),
			giveNow:   serverNow.Add(30 * time.Second),
			wantDelay: 30 * time.Second, wantOK: true,
		},
		{
			name:      "two Dates: the earliest",
			giveH:     header("Date", "Mon, 01 Jul 2013 17:27:36 GMT", "Date", serverDate, "Retry-After", "Mon, 01 Jul 2013 17:28:06 GMT"),
			giveNow:   serverNow,
			wantDelay: time.Minute, wantOK: true,
		},

		// retry-after-ms (OpenAI, Azure OpenAI).
		{name: "retry-after-ms alone", giveH: header("retry-after-ms", "1500"), wantDelay: 1500 * time.Millisecond, wantOK: true},
		{name: "retry-after-ms float", giveH: header("retry-after-ms", "20.5"), wantDelay: 20500 * time.Microsecond, wantOK: true},
		{name: "retry-after-ms refines Retry-After", giveH: header("Retry-After", "2", "retry-after-ms", "1500"), wantDelay: 1500 * time.Millisecond, wantOK: true},
		{name: "retry-after-ms refines Retry-After upward", giveH: header("Retry-After", "1", "retry-after-ms", "1234.5"), wantDelay: 1234500 * time.Microsecond, wantOK: true},
		{name: "Azure retry-after-ms 0 does not shorten", giveH: header("Retry-After", "10", "retry-after-ms", "0"), wantDelay: 10 * time.Second, wantOK: true},
		{name: "Azure retry-after-ms -1 is ignored", giveH: header("Retry-After", "10", "retry-after-ms", "-1"), wantDelay: 10 * time.Second, wantOK: true},
		{name: "retry-after-ms -1 alone", giveH: header("retry-after-ms", "-1")},
		{name: "retry-after-ms huge", giveH: header("retry-after-ms", "1e309")},
		{name: "retry-after-ms duplicates", giveH: header("retry-after-ms", "100", "retry-after-ms", "250"), wantDelay: 250 * time.Millisecond, wantOK: true},

		// IETF RateLimit (draft-ietf-httpapi-ratelimit-headers).
		{name: "IETF exhausted", giveH: header("RateLimit", `"default";r=0;t=30`), wantDelay: 30 * time.Second, wantOK: true},
		{name: "IETF remaining is no signal", giveH: header("RateLimit", `"default";r=50;t=30`)},
		{name: "IETF token id", giveH: header("RateLimit", `protection;r=0;t=5`), wantDelay: 5 * time.Second, wantOK: true},
		{name: "IETF r omitted", giveH: header("RateLimit", `"default";t=10`), wantDelay: 10 * time.Second, wantOK: true},
		{name: "IETF t omitted", giveH: header("RateLimit", `"default";r=0`)},
		{name: "IETF t zero", giveH: header("RateLimit", `"default";r=0;t=0`)},
		{name: "IETF with policy", giveH: header("RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`, "RateLimit", `"burst";r=0;t=30`), wantDelay: 30 * time.Second, wantOK: true},
		{name: "IETF policy alone", giveH: header("RateLimit-Policy", `"burst";q=100;w=60`)},
		{name: "IETF longest exhausted", giveH: header("RateLimit", `"burst";r=0;t=5, "daily";r=0;t=3600`), wantDelay: time.Hour, wantOK: true},
		{name: "IETF only exhausted count", giveH: header("RateLimit", `"burst";r=0;t=5, "daily";r=900;t=3600`), wantDelay: 5 * time.Second, wantOK: true},
		{name: "IETF field lines combine", giveH: header("RateLimit", `"burst";r=9;t=5`, "RateLimit", `"daily";r=0;t=3600`), wantDelay: time.Hour, wantOK: true},
		{name: "IETF duplicate id, lowest remaining", giveH: header("RateLimit", `"a";r=5;t=10, "a";r=0;t=20`), wantDelay: 20 * time.Second, wantOK: true},
		{name: "IETF huge t", giveH: header("RateLimit", `"default";r=0;t=999999999999999`), wantDelay: retryafter.MaxDelayValue, wantOK: true},
		{name: "IETF negative t skipped", giveH: header("RateLimit", `"default";r=0;t=-5`)},
		{name: "IETF string t skipped", giveH: header("RateLimit", `"default";r=0;t="5"`)},
		{name: "IETF malformed", giveH: header("RateLimit", `"default";r=0;t=`)},
		{name: "IETF unterminated string", giveH: header("RateLimit", `"default;r=0;t=5`)},
		{name: "IETF inner list skipped", giveH: header("RateLimit", `("a" "b");r=0;t=5`)},
		{name: "IETF integer id skipped", giveH: header("RateLimit", `5;r=0;t=5`)},
		{name: "IETF too long", giveH: header("RateLimit", `"default";r=0;t=5,`+strings.Repeat(`"x";r=1,`, 600)+`"y";r=1`)},
		{name: "IETF malformed falls through", giveH: header("RateLimit", `"default";r=0;t=`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"), wantDelay: time.Minute, wantOK: true},
		{name: "draft-07 dictionary", giveH: header("RateLimit", "limit=100, remaining=0, reset=5"), wantDelay: 5 * time.Second, wantOK: true},
		{name: "draft-07 dictionary remaining", giveH: header("RateLimit", "limit=100, remaining=50, reset=5")},
		{name: "draft-03", giveH: header("RateLimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "0", "RateLimit-Reset", "7"), wantDelay: 7 * time.Second, wantOK: true},
		{name: "draft-03 remaining", giveH: header("RateLimit-Limit", "10", "RateLimit-Remaining", "5", "RateLimit-Reset", "7")},
		{name: "draft-03 reset alone", giveH: header("RateLimit-Reset", "7"), wantDelay: 7 * time.Second, wantOK: true},

		// Headers built by hand, with keys not in canonical form.
		{name: "lower-case keys", giveH: http.Header{"x-ratelimit-remaining": {"0"}, "x-ratelimit-reset": {"7"}}, wantDelay: 7 * time.Second, wantOK: true},
		{name: "mixed-case duplicates", giveH: http.Header{"Retry-After": {"5"}, "retry-after": {"9"}, "RETRY-AFTER": {"x"}}, wantDelay: 9 * time.Second, wantOK: true},
		{name: "RateLimit as the draft spells it", giveH: http.Header{"RateLimit": {`"default";r=0;t=12`}}, wantDelay: 12 * time.Second, wantOK: true},
		{name: "upper-case Anthropic", giveH: http.Header{"Date": {serverDate}, "ANTHROPIC-RATELIMIT-INPUT-TOKENS-REMAINING": {"0"}, "ANTHROPIC-RATELIMIT-INPUT-TOKENS-RESET": {"2013-07-01T17:27:16Z"}}, giveNow: serverNow.Add(time.Hour), wantDelay: 10 * time.Second, wantOK: true},
		{name: "lower-case Date", giveH: http.Header{"date": {serverDate}, "retry-after": {"Mon, 01 Jul 2013 17:28:06 GMT"}}, giveNow: serverNow.Add(5 * time.Minute), wantDelay: time.Minute, wantOK: true},
		{name: "lower-case Age", giveH: http.Header{"age": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"7"}}},
		{name: "lower-case unrelated key", giveH: http.Header{"x-request-id": {"abc"}, "Retry-After": {"3"}}, wantDelay: 3 * time.Second, wantOK: true},
		// strings.EqualFold folds the long s to "s".
		{name: "non-ASCII key", giveH: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Re\u017fet": {"7"}}, wantDelay: 7 * time.Second, wantOK: true},

		// Precedence.
		{
			name: "Retry-After beats IETF and quotas",
			giveH: header("Retry-After", "5", "RateLimit", `"default";r=0;t=30`,
				"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"),
			wantDelay: 5 * time.Second, wantOK: true,
		},
		{
			name:      "IETF beats quotas",
			giveH:     header("RateLimit", `"default";r=0;t=10`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"),
			wantDelay: 10 * time.Second, wantOK: true,
		},
		{
			name:      "IETF not exhausted, quota is",
			giveH:     header("RateLimit", `"default";r=3;t=10`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"),
			wantDelay: time.Minute, wantOK: true,
		},
		{
			name:      "invalid Retry-After falls through to IETF",
			giveH:     header("Retry-After", "later", "RateLimit", `"default";r=0;t=10`),
			wantDelay: 10 * time.Second, wantOK: true,
		},

		// Age: a cached response's rate-limit fields are stale.
		{name: "Age ignores IETF", giveH: header("Age", "10", "RateLimit", `"default";r=0;t=30`)},
		{name: "Age ignores quotas", giveH: header("Age", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60")},
		{name: "Age keeps Retry-After", giveH: header("Age", "10", "Retry-After", "5"), wantDelay: 5 * time.Second, wantOK: true},
		{name: "Age 0", giveH: header("Age", "0", "RateLimit", `"default";r=0;t=30`), wantDelay: 30 * time.Second, wantOK: true},
		{name: "Age malformed", giveH: header("Age", "old", "RateLimit", `"default";r=0;t=30`), wantDelay: 30 * time.Second, wantOK: true},

		// X-RateLimit-*: delta (Envoy), fractional epoch and Reset-After (Discord).
		{name: "Envoy delta", giveH: header("X-RateLimit-Limit", "10, 10;w=1", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "7"), wantDelay: 7 * time.Second, wantOK: true},
		{name: "X-RateLimit remaining", giveH: header("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "7")},
		{name: "X-RateLimit remaining missing", giveH: header("X-RateLimit-Reset", "7")},
		{name: "X-RateLimit remaining malformed", giveH: header("X-RateLimit-Remaining", "none", "X-RateLimit-Reset", "7")},
		{name: "X-RateLimit negative remaining", giveH: header("X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", "7"), wantDelay: 7 * time.Second, wantOK: true},
		{name: "X-RateLimit lowest remaining", giveH: header("X-RateLimit-Remaining", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "7"), wantDelay: 7 * time.Second, wantOK: true},
		{name: "X-RateLimit remaining list", giveH: header("X-RateLimit-Remaining", "5, 0", "X-RateLimit-Reset", "7, 9"), wantDelay: 9 * time.Second, wantOK: true},
		{name: "X-RateLimit reset just below epoch", giveH: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "999999999"), wantDelay: retryafter.MaxDelayValue, wantOK: true},
		{name: "X-RateLimit reset negative", giveH: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "-7")},
		{
			name:      "Discord Reset-After wins",
			giveH:     header("X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1470173023.123", "X-RateLimit-Reset-After", "64.57", "X-RateLimit-Bucket", "abcd1234"),
			giveNow:   time.Unix(1470172000, 0),
			wantDelay: 64570 * time.Millisecond, wantOK: true,
		},
		{
			name:      "Discord fractional epoch",
			giveH:     header("Date", "Tue, 02 Aug 2016 21:22:18 GMT", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1470173023.123"),
			giveNow:   time.Date(2016, 8, 2, 21, 22, 18, 0, time.UTC),
			wantDelay: 85123 * time.Millisecond, wantOK: true,
		},
		{
			name:    "epoch in the past",
			giveH:   header("Date", serverDate, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1372699000"),
			giveNow: serverNow,
		},
		{
			name:      "epoch without Date uses now",
			giveH:     header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1372700873"),
			giveNow:   serverNow.Add(5 * time.Minute),
			wantDelay: 15*time.Minute + 47*time.Second, wantOK: true,
		},

		// OpenAI: Go durations.
		{
			name: "OpenAI requests exhausted",
			giveH: header("x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "149984",
				"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
			wantDelay: time.Second, wantOK: true,
		},
		{
			name: "OpenAI tokens exhausted",
			giveH: header("x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "0",
				"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
			wantDelay: 6 * time.Minute, wantOK: true,
		},
		{
			name: "OpenAI both exhausted, the longest",
			giveH: header("x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "0",
				"x-ratelimit-reset-requests", "12ms", "x-ratelimit-reset-tokens", "1m30.5s"),
			wantDelay: 90500 * time.Millisecond, wantOK: true,
		},
		{
			name: "OpenAI not exhausted",
			giveH: header("x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "59",
				"x-ratelimit-reset-requests", "1s"),
		},
		{name: "OpenAI negative reset", giveH: header("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "-1s")},
		{name: "OpenAI garbage reset", giveH: header("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1 s")},
		{name: "OpenAI overflowing reset", giveH: header("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "9999999999999h")},
		{name: "OpenAI long reset clamped", giveH: header("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "9999h"), wantDelay: retryafter.MaxDelayValue, wantOK: true},
		{name: "OpenAI seconds reset", giveH: header("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "2.5"), wantDelay: 2500 * time.Millisecond, wantOK: true},

		// Anthropic: RFC 3339.
		{
			name:      "Anthropic fractional RFC 3339",
			giveH:     header("Date", serverDate, "anthropic-ratelimit-tokens-remaining", "0", "anthropic-ratelimit-tokens-reset", "2013-07-01T17:27:36.5Z"),
			giveNow:   serverNow,
			wantDelay: 30500 * time.Millisecond, wantOK: true,
		},
		{
			name:      "Anthropic offset",
			giveH:     header("Date", serverDate, "anthropic-ratelimit-output-tokens-remaining", "0", "anthropic-ratelimit-output-tokens-reset", "2013-07-01T19:28:06+02:00"),
			giveNow:   serverNow,
			wantDelay: time.Minute, wantOK: true,
		},
		{
			name:    "Anthropic not exhausted",
			giveH:   header("Date", serverDate, "anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", "2013-07-01T17:28:06Z"),
			giveNow: serverNow,
		},
		{name: "Anthropic bad reset", giveH: header("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "tomorrow")},

		// Shopify: a leaky bucket of 40 (or 400 on Plus) that drains in 20s.
		{name: "Shopify full", giveH: header("X-Shopify-Shop-Api-Call-Limit", "40/40"), wantDelay: 500 * time.Millisecond, wantOK: true},
		{name: "Shopify Plus full", giveH: header("X-Shopify-Shop-Api-Call-Limit", "400/400"), wantDelay: 50 * time.Millisecond, wantOK: true},
		{name: "Shopify over", giveH: header("X-Shopify-Shop-Api-Call-Limit", "42/40"), wantDelay: 1500 * time.Millisecond, wantOK: true},
		{name: "Shopify not full", giveH: header("X-Shopify-Shop-Api-Call-Limit", "32/40")},
		{name: "Shopify malformed", giveH: header("X-Shopify-Shop-Api-Call-Limit", "40")},
		{name: "Shopify zero size", giveH: header("X-Shopify-Shop-Api-Call-Limit", "0/0")},
		{name: "Shopify negative", giveH: header("X-Shopify-Shop-Api-Call-Limit", "-1/40")},
	}

	// Absolute times with the client's clock 5 minutes off either way: the
	// Date header cancels the skew.
	for _, skew := range skews {
		now := serverNow.Add(skew)
		tests = append(tests,
			parseTest{
				name:      "skew " + skew.String() + " Retry-After date",
				giveH:     header("Date", serverDate, "Retry-After", "Mon, 01 Jul 2013 17:28:06 GMT"),
				giveNow:   now,
				wantDelay: time.Minute, wantOK: true,
			},
			parseTest{
				name: "skew " + skew.String() + " GitHub primary limit",
				giveH: header("Date", serverDate, "x-ratelimit-limit", "60", "x-ratelimit-remaining", "0",
					"x-ratelimit-used", "60", "x-ratelimit-reset", "1372700873", "x-ratelimit-resource", "core"),
				giveNow:   now,
				wantDelay: 20*time.Minute + 47*time.Second, wantOK: true,
			},
			parseTest{
				name: "skew " + skew.String() + " GitHub remaining",
				giveH: header("Date", serverDate, "x-ratelimit-limit", "60", "x-ratelimit-remaining", "56",
					"x-ratelimit-used", "4", "x-ratelimit-reset", "1372700873", "x-ratelimit-resource", "core"),
				giveNow: now,
			},
			parseTest{
				name: "skew " + skew.String() + " X",
				giveH: header("Date", serverDate, "x-rate-limit-limit", "900", "x-rate-limit-remaining", "0",
					"x-rate-limit-reset", "1372700873"),
				giveNow:   now,
				wantDelay: 20*time.Minute + 47*time.Second, wantOK: true,
			},
			parseTest{
				name: "skew " + skew.String() + " Anthropic",
				giveH: header("Date", serverDate, "anthropic-ratelimit-requests-limit", "50",
					"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2013-07-01T17:28:06Z"),
				giveNow:   now,
				wantDelay: time.Minute, wantOK: true,
			},
		)
	}
	return tests
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests() {
		t.Run(tt.name, func(t *testing.T) {
			gotDelay, gotOK := retryafter.Parse(tt.giveH, tt.giveNow)
			assert.Equal(t, tt.wantDelay, gotDelay)
			assert.Equal(t, tt.wantOK, gotOK)
		})
	}
}
