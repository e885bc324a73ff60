package retryafter

import (
	"net/http"
	"testing"
)

// FuzzHTTPDate checks that parseHTTPDate accepts exactly what
// http.ParseTime accepts, at the same instant.
func FuzzHTTPDate(f *testing.F) {
	for _, v := range []string{
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Sunday, 06-Nov-94 08:49:37 PST", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun Nov 6 08:49:37 1994",
		"Mon, 01 Jul 2013 17:27:36 GMT", ",", "Sun,", "Monday,", "Sun, 31 Feb 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT+1", "Fri, 31 Dec 9999 23:59:59 GMT", "",
	} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := parseHTTPDate(v)
		want, err := http.ParseTime(v)
		if ok != (err == nil) || (ok && !got.Equal(want)) {
			t.Fatalf("parseHTTPDate(%q) = %v, %v; http.ParseTime: %v, %v", v, got, ok, want, err)
		}
	})
}
