package retryafter_test

import (
	"net/http"
	"strings"
	"time"
)

// serverNow is the server's clock in GitHub's documented example, whose
// Date is serverDate and whose x-ratelimit-reset is 1372700873
// (2013-07-01 17:47:53 UTC), 20m47s later.
var serverNow = time.Date(2013, 7, 1, 17, 27, 6, 0, time.UTC)

const serverDate = "Mon, 01 Jul 2013 17:27:06 GMT"

// header builds a header from "Key", "value" pairs, in order, keeping
// repeated keys as repeated field lines.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// rawHeader renders h as "Key: value" lines, the input format of FuzzParse.
func rawHeader(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	return b.String()
}

// parseRawHeader is the inverse of rawHeader. Lines without ": " are
// skipped.
func parseRawHeader(raw string) http.Header {
	h := http.Header{}
	for line := range strings.SplitSeq(raw, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			h.Add(k, v)
		}
	}
	return h
}
