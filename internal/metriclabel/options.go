package metriclabel

import "fmt"

// DefaultMaxKeys is how many distinct keys, and how many distinct hosts,
// get a value of their own unless an adapter's options say otherwise.
const DefaultMaxKeys = 100

// Config is what an adapter's options set.
type Config struct {
	Keys    []string // allow-list; nil means "the first MaxKeys seen"
	MaxKeys int
	Rater   Rater // whose learned rates to report, or nil
}

// Rater reports the rate a limiter learned for a key, in units per
// second, as [throttle.Adaptive.Rate] does.
type Rater interface {
	Rate(key string) float64
}

// Option sets a field of a Config. The adapters wrap it in an Option type
// of their own.
type Option func(*Config)

// WithKeys makes exactly keys values of their own.
func WithKeys(keys []string) Option {
	keys = append([]string{}, keys...)
	return func(c *Config) { c.Keys = keys }
}

// WithMaxKeys gives the first n distinct keys seen a value of their own.
// It panics, naming the adapter pkg, if n is negative.
func WithMaxKeys(pkg string, n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("%s: WithMaxKeys given a negative n: %d", pkg, n))
	}
	return func(c *Config) { c.MaxKeys = n }
}

// WithLearnedRate reports r's rate for each key with a value of its
// own. It panics, naming the adapter pkg, if r is nil.
func WithLearnedRate(pkg string, r Rater) Option {
	if r == nil {
		panic(pkg + ": WithLearnedRate given a nil limiter")
	}
	return func(c *Config) { c.Rater = r }
}

// Configure applies opts, of an adapter's Option interface, to the
// defaults with apply. It panics, naming the adapter pkg, if an option is
// nil.
func Configure[O any](pkg string, opts []O, apply func(O, *Config)) Config {
	c := Config{MaxKeys: DefaultMaxKeys}
	for i, o := range opts {
		if any(o) == nil {
			panic(fmt.Sprintf("%s: New given a nil Option at index %d", pkg, i))
		}
		apply(o, &c)
	}
	return c
}

// DurationBuckets are the bucket boundaries, in seconds, of the request
// duration histogram: those OpenTelemetry advises for
// http.client.request.duration, stretched to a minute, since a refused
// request may have waited that long for its slot.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60}

// WaitBuckets are the bucket boundaries, in seconds, of the histograms of
// waits and pauses: from a millisecond, the spacing of a budget of
// 1 000/s, to five minutes, since a batch job may raise the Transport's
// MaxWait (30 s by default) and the retry policy's MaxPause (60 s) well
// past a minute.
var WaitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// RedisBuckets are the bucket boundaries, in seconds, of the histogram of
// round trips to Redis: from 100µs, a round trip in one data centre, to
// a second, past redislimit's DefaultTimeout of 250ms.
var RedisBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
