package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// okHandler answers 200 with an empty body.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})

// get sends one GET through h from remote (an "ip:port"), with the header
// pairs kv, and returns the response.
func get(h http.Handler, remote string, kv ...string) *http.Response {
	req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}
