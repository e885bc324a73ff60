package egressprom_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/extra/egressprom"
	"github.com/egress-go/egress/throttle"
)

func ExampleNew() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()

	// Register the metrics once; real code serves the registry with
	// promhttp.HandlerFor.
	m := egressprom.New(egressprom.WithMaxKeys(50))
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	tb, _ := throttle.NewTokenBucket(throttle.PerSecond(10), 5)
	t := egress.NewTransport(nil,
		egress.WithLimiter(tb),
		egress.WithObserver(m.Observer(nil)),
	)
	client := &http.Client{Transport: m.Instrument(t)}

	for range 3 {
		resp, err := client.Get(upstream.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	out, _ := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, "egress_requests_total")
	fmt.Print(string(out))
	// Output:
	// # HELP egress_requests_total Attempts acquired (sent) and requests refused, timed out or canceled, by result.
	// # TYPE egress_requests_total counter
	// egress_requests_total{result="acquired"} 3
	// egress_requests_total{result="canceled"} 0
	// egress_requests_total{result="limiter_error"} 0
	// egress_requests_total{result="refused_full"} 0
	// egress_requests_total{result="refused_limit"} 0
	// egress_requests_total{result="timeout"} 0
}

func ExampleMetrics_Observer() {
	m := egressprom.New()

	// Metrics pass every event on to the Observer they are given: here a
	// log/slog one, writing without times so the output is the same on
	// every run.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	obs := m.Observer(egress.NewSlogObserver(logger))

	// What a Transport reports when a 429 pauses a key.
	obs.Paused(egress.PauseInfo{Key: "api.example.com", StatusCode: 429, Duration: 2e9})

	out, _ := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, "egress_pause_duration_seconds")
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "_sum") || strings.Contains(line, "_count") {
			fmt.Print(line)
		}
	}
	// Output:
	// level=WARN msg="egress: key paused" key_hash=d0c43d3885064d9a status=429 duration=2s
	// egress_pause_duration_seconds_sum{key="api.example.com"} 2
	// egress_pause_duration_seconds_count{key="api.example.com"} 1
}

func ExampleWithLearnedRate() {
	// An upstream that hides its limit and answers 429 to /busy.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()

	learned, _ := throttle.NewAdaptive(throttle.PerSecond(100)) // a ceiling, not a guess
	m := egressprom.New(egressprom.WithLearnedRate(learned))
	t := egress.NewTransport(nil, egress.WithLimiter(learned), egress.WithObserver(m.Observer(nil)))
	client := &http.Client{Transport: m.Instrument(t)}

	resp, err := client.Get(upstream.URL + "/busy")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	// The gauge has one series per key (here the host), at the rate the
	// 429 taught the limiter: below its ceiling of 100/s.
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == "egress_learned_rate" {
			for _, s := range f.GetMetric() {
				key := s.GetLabel()[0].GetValue()
				fmt.Println(f.GetName(), "for the host:", key == strings.TrimPrefix(upstream.URL, "http://"),
					"below 100/s:", s.GetGauge().GetValue() < 100)
			}
		}
	}
	// Output:
	// egress_learned_rate for the host: true below 100/s: true
}
