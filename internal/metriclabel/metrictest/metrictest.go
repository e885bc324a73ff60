// Package metrictest holds what the tests and benchmarks of the metrics
// adapters under extra/ share: an in-memory base, a limiter that waits a
// known time, and the overhead benchmark, whose interleaved measure
// bench/micro uses too.
package metrictest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/queue"
	"github.com/egress-go/egress/throttle"
)

// MemBase is an in-memory base RoundTripper: 200, empty body.
type MemBase struct{}

// RoundTrip implements [http.RoundTripper].
func (MemBase) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}

// LimitZeroBase answers every request 200, stating a quota with a limit
// of 0, which the Transport clamps and reports to its Observer's Clamped
// func as the field "Limit".
type LimitZeroBase struct{}

// RoundTrip implements [http.RoundTripper].
func (LimitZeroBase) RoundTrip(req *http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "0")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "5")
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req, Header: h}, nil
}

// StepLimiter grants every request after Wait, so that every attempt
// waits a known time, refuses the key "refuse", and accepts pauses
// without shifting anything.
type StepLimiter struct {
	Wait time.Duration
}

// Reserve implements [throttle.Limiter].
func (l StepLimiter) Reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*throttle.Reservation, error) {
	if key == "refuse" {
		return throttle.Refused(time.Minute, 0), nil
	}
	return throttle.NewReservation(deadline(time.Now().Add(l.Wait)), l.Wait, 0), nil
}

// Pause implements [throttle.Pauser].
func (StepLimiter) Pause(ctx context.Context, key string, d time.Duration) error { return nil }

// deadline is a Booking whose units are the caller's at a fixed time.
type deadline time.Time

func (d deadline) Until() time.Duration           { return time.Until(time.Time(d)) }
func (deadline) Cancel(ctx context.Context) error { return nil }

// Attach makes the metrics of one adapter, attaches them to the Transport
// that newTransport builds with the options given (its Observer), and
// returns the RoundTripper to send through.
type Attach func(newTransport func(...egress.Option) *egress.Transport) http.RoundTripper

// BenchmarkOverhead measures what an adapter's metrics add to a request,
// set up as bench/micro's BenchmarkTransportOverhead: a Transport that
// never makes a call wait, over an in-memory base. The goal is that the
// Transport with metrics attached stays within 1µs and 3 allocations of
// the bare base.
//
// The lib= runs measure each RoundTripper alone. The overhead= runs
// measure two of them interleaved, in blocks of 64 requests, in the
// thread's CPU time (see [Interleaved]), so that a busy machine slows both
// alike: ns/op is then what the
// second adds over the first, added-allocs/op its allocations, and
// "ratio" its time over the first's.
func BenchmarkOverhead(b *testing.B, name string, attach Attach) {
	req, err := http.NewRequest(http.MethodGet, "http://api.example/v1", nil)
	if err != nil {
		b.Fatal(err)
	}
	limited := func(opts ...egress.Option) *egress.Transport {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: 1e9, Per: time.Second}, 1e6)
		if err != nil {
			b.Fatal(err)
		}
		q, err := queue.New(1<<20, 0)
		if err != nil {
			b.Fatal(err)
		}
		return egress.NewTransport(MemBase{}, append([]egress.Option{egress.WithLimiter(tb), egress.WithQueue(q)}, opts...)...)
	}
	// Over a Transport without limiter or queue, which hands every
	// request straight to the base, the difference is what the metrics
	// alone add.
	passThrough := func(opts ...egress.Option) *egress.Transport { return egress.NewTransport(MemBase{}, opts...) }
	var (
		bare    = http.RoundTripper(MemBase{})
		plain   = limited()
		metered = attach(limited)
	)
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare-base", bare},
		{"pass-through", passThrough()},
		{"pass-through+metrics", attach(passThrough)},
		{"egress", plain},
		{"egress+" + name, metered},
	} {
		b.Run("lib="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				roundTrip(b, c.rt, req)
			}
		})
	}
	b.Run("overhead=egress+"+name+"-over-bare-base", func(b *testing.B) { Interleaved(b, req, bare, metered) })
	b.Run("overhead="+name+"-over-egress", func(b *testing.B) { Interleaved(b, req, plain, metered) })
}

func roundTrip(b *testing.B, rt http.RoundTripper, req *http.Request) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	_ = resp.Body.Close()
}

// Interleaved sends b.N requests through each of base and rt, in
// alternating blocks, and reports what rt adds: ns/op is rt's time less
// base's, added-allocs/op its allocations less base's, and ratio its
// time over base's. It counts the CPU time of
// the benchmark's thread (on Linux), so that the time other processes take
// on a busy machine is not counted; the work is all on that thread, as
// neither RoundTripper starts a goroutine.
func Interleaved(b *testing.B, req *http.Request, base, rt http.RoundTripper) {
	const block = 64
	var (
		took  [2]time.Duration
		clock threadClock
	)
	rts := [2]http.RoundTripper{base, rt}
	clock.lock()
	for done, pass := 0, 0; done < b.N; pass++ {
		n := min(block, b.N-done)
		for i := range 2 {
			j := (i + pass) % 2 // which goes first alternates
			start := clock.now()
			for range n {
				roundTrip(b, rts[j], req)
			}
			took[j] += clock.now() - start
		}
		done += n
	}
	clock.unlock()
	b.StopTimer()
	allocs := testing.AllocsPerRun(200, func() { roundTrip(b, rt, req) }) - testing.AllocsPerRun(200, func() { roundTrip(b, base, req) })
	b.ReportMetric(float64(took[1]-took[0])/float64(b.N), "ns/op")
	b.ReportMetric(allocs, "added-allocs/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "ratio")
}
