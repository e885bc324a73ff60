package micro

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"

	"github.com/egress-go/egress/middleware"
	"github.com/egress-go/egress/throttle"
)

// serverLib is one server-side rate-limiting middleware, set up as its
// docs show, keyed by client IP (each library's usual key).
type serverLib struct {
	lib  string
	wrap func(tb testing.TB, next http.Handler) http.Handler
}

// remoteIP is how the peers that take a key func read the client IP.
func remoteIP(r *http.Request) string {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	return host
}

// generousServerLibs returns every middleware with a limit far above what
// a benchmark sends, so that every request is admitted and each pays its
// full path (headers included).
func generousServerLibs() []serverLib {
	return []serverLib{
		{lib: "none", wrap: func(_ testing.TB, next http.Handler) http.Handler { return next }},
		{lib: "egress", wrap: func(tb testing.TB, next http.Handler) http.Handler {
			l, err := throttle.NewTokenBucket(throttle.PerSecond(1_000_000_000), 1_000_000_000)
			if err != nil {
				tb.Fatal(err)
			}
			return middleware.New(l).Wrap(next)
		}},
		{lib: "httprate", wrap: func(_ testing.TB, next http.Handler) http.Handler {
			return httprate.LimitBy(1<<40, time.Second, func(r *http.Request) (string, error) {
				return httprate.CanonicalizeIP(remoteIP(r)), nil
			})(next)
		}},
		{lib: "tollbooth", wrap: func(_ testing.TB, next http.Handler) http.Handler {
			lmt := tollbooth.NewLimiter(1e12, nil)
			lmt.SetIPLookups([]string{"RemoteAddr"})
			return tollbooth.LimitHandler(lmt, next)
		}},
		{lib: "throttled", wrap: func(tb testing.TB, next http.Handler) http.Handler {
			store, err := memstore.NewCtx(2 * numKeys)
			if err != nil {
				tb.Fatal(err)
			}
			rl, err := throttled.NewGCRARateLimiterCtx(store, throttled.RateQuota{MaxRate: throttled.PerSec(1_000_000_000), MaxBurst: 1_000_000})
			if err != nil {
				tb.Fatal(err)
			}
			return (&throttled.HTTPRateLimiterCtx{RateLimiter: rl, VaryBy: &throttled.VaryBy{RemoteAddr: true}}).RateLimit(next)
		}},
	}
}

// discardWriter is a ResponseWriter that keeps nothing but its header
// map, cleared between requests, so that a benchmark measures the
// middleware and not the recorder.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// clientRequests returns n requests from n client IPs.
func clientRequests(n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		r, _ := http.NewRequest(http.MethodGet, "http://api.test/v1/items", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:%d", i>>16&255, i>>8&255, i&255, 40000+i%20000)
		reqs[i] = r
	}
	return reqs
}

// BenchmarkMiddleware measures what each middleware adds to a request
// that it admits, on 1 client and on 10 000, against lib=none (the bare
// handler). The goal for egress: at most the fastest peer's ns/op, and at
// most 2 allocs/op above lib=none.
func BenchmarkMiddleware(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, keys := range []int{1, numKeys} {
		reqs := clientRequests(keys)
		for _, s := range generousServerLibs() {
			b.Run("keys="+strconv.Itoa(keys)+"/lib="+s.lib, func(b *testing.B) {
				h := s.wrap(b, ok)
				w := &discardWriter{h: http.Header{}}
				for _, r := range reqs { // every key is known, as in a steady state
					h.ServeHTTP(w, r)
				}
				b.ReportAllocs()
				b.ResetTimer()
				i := 0
				for b.Loop() {
					clear(w.h)
					h.ServeHTTP(w, reqs[i])
					if w.code > 299 {
						b.Fatalf("%s refused a request: %d", s.lib, w.code)
					}
					if i++; i == len(reqs) {
						i = 0
					}
				}
			})
		}
	}
}
