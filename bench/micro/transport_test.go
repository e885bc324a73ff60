package micro

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/metriclabel/metrictest"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
	"github.com/hashicorp/go-retryablehttp"
)

// memBase is an in-memory http.RoundTripper: it answers 200 with an empty
// body and never touches the network.
type memBase struct{}

func (memBase) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}

// overheadTransport is egress set up so that it never makes a call wait:
// one in-process limiter with a huge rate, the record of what the
// upstream states (the README's recipe), a queue with room for everyone,
// and no retry.
func overheadTransport(b *testing.B, base http.RoundTripper, opts ...egress.Option) *egress.Transport {
	tb, err := throttle.NewTokenBucket(throttle.Rate{N: 1e9, Per: time.Second}, 1e6)
	if err != nil {
		b.Fatal(err)
	}
	q, err := queue.New(1<<20, 0)
	if err != nil {
		b.Fatal(err)
	}
	u, err := throttle.NewUpstream()
	if err != nil {
		b.Fatal(err)
	}
	return egress.NewTransport(base, append([]egress.Option{egress.WithLimiter(tb), egress.WithUpstream(u), egress.WithQueue(q)}, opts...)...)
}

// BenchmarkTransportOverhead measures what egress adds to a request: its
// Transport over an in-memory base against the bare base. The lib= runs
// measure each alone; the overhead= run measures both interleaved in the
// thread's CPU time (metrictest.Interleaved), so that a busy machine
// slows both alike: its ns/op is what egress adds (goal: ≤ 1µs and ≤ 3
// allocs).
func BenchmarkTransportOverhead(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, "http://api.example/v1", nil)
	if err != nil {
		b.Fatal(err)
	}
	egressRT := overheadTransport(b, memBase{})
	runEach(b, req, []libRT{{"bare-base", memBase{}}, {"egress", egressRT}})
	b.Run("overhead=egress-over-bare-base", func(b *testing.B) { metrictest.Interleaved(b, req, memBase{}, egressRT) })
}

// libRT is one RoundTripper of a benchmark, named as its lib= run.
type libRT struct {
	lib string
	rt  http.RoundTripper
}

// runEach runs one lib= benchmark of req through each RoundTripper.
func runEach(b *testing.B, req *http.Request, rts []libRT) {
	for _, c := range rts {
		b.Run("lib="+c.lib, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
			}
		})
	}
}

// getter sends one GET and reads the whole response.
type getter struct {
	lib string
	get func(url string) error
}

func loopbackGetters(b *testing.B) []getter {
	transport := func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		return t
	}
	viaClient := func(hc *http.Client) func(string) error {
		return func(url string) error {
			resp, err := hc.Get(url)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		}
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: transport()}
	rc.Logger = nil
	return []getter{
		{"bare-http.Client", viaClient(&http.Client{Transport: transport()})},
		{"egress", viaClient(&http.Client{Transport: overheadTransport(b, transport())})},
		{"go-retryablehttp", viaClient(rc.StandardClient())},
	}
}

// BenchmarkLoopback measures a whole request to a loopback HTTP/1.1
// server through a bare http.Client, egress, and go-retryablehttp, from
// one goroutine and from 8.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	b.Run("goroutines=1", func(b *testing.B) {
		for _, g := range loopbackGetters(b) {
			b.Run("lib="+g.lib, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := g.get(srv.URL); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	})
	b.Run("goroutines=8", func(b *testing.B) {
		for _, g := range loopbackGetters(b) {
			b.Run("lib="+g.lib, func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := g.get(srv.URL); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	})
}
