package llmupstream

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Path is where the API answers.
const Path = "/v1/messages"

// Limits are the API's published rate limits. Each is a token bucket that
// holds up to its limit and refills continuously at limit per Period.
type Limits struct {
	Requests     int // requests per Period
	InputTokens  int // input tokens per Period
	OutputTokens int // output tokens per Period

	// Period is the "minute" of the limits. 0 means time.Minute; the
	// examples and the bench compress it to seconds.
	Period time.Duration
}

func (l Limits) period() time.Duration {
	if l.Period == 0 {
		return time.Minute
	}
	return l.Period
}

// Config sets up an [API].
type Config struct {
	Limits

	// Seed draws the output length of requests that carry no seed of
	// their own.
	Seed uint64

	// FirstToken is how long the API takes before its first output
	// token, and PerToken how long each output token takes. Both 0 mean
	// an instant reply.
	FirstToken, PerToken time.Duration
}

// Request is the body of a call.
type Request struct {
	PromptTokens int `json:"prompt_tokens"` // input tokens; 0 or more
	MaxTokens    int `json:"max_tokens"`    // the most output tokens; 1 or more

	// Seed draws the output length ([Output]). 0 means the API draws it
	// from its own seed.
	Seed uint64 `json:"seed,omitempty"`

	// Stream asks for server-sent events.
	Stream bool `json:"stream,omitempty"`
}

// Usage is what a call used, as the API counts it.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Message is the body of a successful reply that is not streamed.
type Message struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"` // "message"
	Content    []Content `json:"content"`
	StopReason string    `json:"stop_reason"` // "end_turn"
	Usage      Usage     `json:"usage"`
}

// Content is one block of a reply's text.
type Content struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// Output returns how many output tokens the API generates for a request
// with maxTokens and seed: a draw from 10% to 50% of maxTokens (at least
// 1), the same for the same arguments.
func Output(maxTokens int, seed uint64) int {
	lo := max((maxTokens+9)/10, 1)
	hi := max(maxTokens/2, lo)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	return lo + rng.IntN(hi-lo+1)
}

// API is the simulated LLM API. It is an [http.Handler]; serve it with
// net/http/httptest. It is safe for concurrent use.
type API struct {
	cfg Config

	// mu guards the fields below. It is never held while sleeping or
	// writing a response.
	mu       sync.Mutex
	requests bucket
	input    bucket
	output   bucket
	rng      *rand.Rand // draws seeds for requests without one
	nextID   int
	stats    Stats
}

var _ http.Handler = (*API)(nil)

// New returns an API with cfg's limits, every bucket full. It returns an
// error naming the field when a limit is not above 0 or a duration is
// negative.
func New(cfg Config) (*API, error) {
	for _, f := range []struct {
		name string
		v    int
	}{{"Requests", cfg.Requests}, {"InputTokens", cfg.InputTokens}, {"OutputTokens", cfg.OutputTokens}} {
		if f.v <= 0 {
			return nil, fmt.Errorf("llmupstream: Limits.%s is %d, want 1 or more", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Limits.Period", cfg.Period}, {"FirstToken", cfg.FirstToken}, {"PerToken", cfg.PerToken}} {
		if f.v < 0 {
			return nil, fmt.Errorf("llmupstream: %s is %v, want 0 or more", f.name, f.v)
		}
	}
	now := time.Now()
	p := cfg.period()
	return &API{
		cfg:      cfg,
		requests: newBucket(cfg.Requests, p, now),
		input:    newBucket(cfg.InputTokens, p, now),
		output:   newBucket(cfg.OutputTokens, p, now),
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x6a09e667f3bcc909)),
		stats:    Stats{Start: now, Period: p},
	}, nil
}

// ServeHTTP implements [http.Handler].
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// No Date: clients measure absolute resets from it, and its whole
	// seconds are too coarse for a minute compressed to seconds.
	w.Header()["Date"] = nil
	if r.URL.Path != Path {
		writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("no such path %q; POST to %s", r.URL.Path, Path))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Sprintf("method %s; want POST", r.Method))
		return
	}
	req, err := a.decode(r.Body)
	if err != nil {
		a.mu.Lock()
		a.stats.Invalid++
		a.mu.Unlock()
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	c, ok := a.admit(w.Header(), req)
	if !ok {
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "rate limit exceeded: the request does not fit in every budget now; see retry-after")
		return
	}
	if req.Stream {
		a.stream(w, r, c)
		return
	}
	sleep(r, a.cfg.FirstToken+time.Duration(c.usage.OutputTokens)*a.cfg.PerToken)
	a.settle(c)
	a.headers(w.Header())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Message{
		ID: c.id, Type: "message", StopReason: "end_turn", Usage: c.usage,
		Content: []Content{{Type: "text", Text: text(c.usage.OutputTokens)}},
	})
}

// call is one admitted request.
type call struct {
	id     string
	max    int
	usage  Usage
	window int // the period it was admitted in
}

// maxBody bounds a request body; the wire format needs a few dozen bytes.
const maxBody = 1 << 16

// decode reads and checks a request body.
func (a *API) decode(body io.Reader) (Request, error) {
	var req Request
	dec := json.NewDecoder(io.LimitReader(body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("body is not a valid request: %v", err)
	}
	switch {
	case req.PromptTokens < 0:
		return req, fmt.Errorf("prompt_tokens is %d, want 0 or more", req.PromptTokens)
	case req.MaxTokens < 1:
		return req, fmt.Errorf("max_tokens is %d, want 1 or more", req.MaxTokens)
	case req.PromptTokens > a.cfg.InputTokens:
		return req, fmt.Errorf("prompt_tokens is %d, above the input-tokens limit of %d per %v: it could never be admitted", req.PromptTokens, a.cfg.InputTokens, a.cfg.period())
	case req.MaxTokens > a.cfg.OutputTokens:
		return req, fmt.Errorf("max_tokens is %d, above the output-tokens limit of %d per %v: it could never be admitted", req.MaxTokens, a.cfg.OutputTokens, a.cfg.period())
	}
	return req, nil
}

// admit books req in every bucket, or in none and sets retry-after. Either
// way it sets the rate-limit headers as they stand after the decision.
func (a *API) admit(h http.Header, req Request) (call, bool) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refill(now)
	window := a.stats.window(now)
	wait := max(a.requests.wait(1), a.input.wait(req.PromptTokens), a.output.wait(req.MaxTokens))
	if wait > 0 {
		a.stats.TooMany++
		a.stats.Windows[window].TooMany++
		a.setHeaders(h, now)
		h.Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		return call{}, false
	}
	a.requests.take(1)
	a.input.take(req.PromptTokens)
	a.output.take(req.MaxTokens)
	seed := req.Seed
	if seed == 0 {
		seed = a.rng.Uint64()
	}
	a.nextID++
	c := call{
		id: fmt.Sprintf("msg_%06d", a.nextID), max: req.MaxTokens, window: window,
		usage: Usage{InputTokens: req.PromptTokens, OutputTokens: Output(req.MaxTokens, seed)},
	}
	a.stats.Requests++
	a.stats.InputTokens += req.PromptTokens
	a.stats.InFlight++
	a.stats.MaxInFlight = max(a.stats.MaxInFlight, a.stats.InFlight)
	w := &a.stats.Windows[window]
	w.Requests++
	w.InputTokens += req.PromptTokens
	a.setHeaders(h, now)
	return c, true
}

// settle adjusts the output bucket to c's actual output: what max_tokens
// overestimated goes back.
func (a *API) settle(c call) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.output.refill(now)
	a.output.give(c.max - c.usage.OutputTokens)
	a.stats.OutputTokens += c.usage.OutputTokens
	a.stats.Windows[c.window].OutputTokens += c.usage.OutputTokens
	a.stats.InFlight--
}

// headers sets the rate-limit headers as they stand now.
func (a *API) headers(h http.Header) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refill(now)
	a.setHeaders(h, now)
}

// refill brings every bucket up to now; a.mu is held.
func (a *API) refill(now time.Time) {
	a.requests.refill(now)
	a.input.refill(now)
	a.output.refill(now)
}

// setHeaders writes the rate-limit headers; a.mu is held.
func (a *API) setHeaders(h http.Header, now time.Time) {
	for _, b := range []struct {
		name string
		b    *bucket
	}{{"requests", &a.requests}, {"input-tokens", &a.input}, {"output-tokens", &a.output}} {
		prefix := "Anthropic-Ratelimit-" + b.name
		h.Set(prefix+"-Limit", strconv.FormatInt(b.b.limit, 10))
		h.Set(prefix+"-Remaining", strconv.Itoa(b.b.remaining()))
		h.Set(prefix+"-Reset", resetTime(now, b.b.untilFull()))
	}
}

// resetTime formats now+d in RFC 3339, rounded up to the millisecond so
// that it is never early.
func resetTime(now time.Time, d time.Duration) string {
	t := now.Add(d).UTC()
	if r := t.Truncate(time.Millisecond); r.Before(t) {
		t = r.Add(time.Millisecond)
	}
	return t.Format(time.RFC3339Nano)
}

// stream sends c as server-sent events: the headers at once, the text in
// pieces as it is generated, then the final usage just before the end.
func (a *API) stream(w http.ResponseWriter, r *http.Request, c call) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	event(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": c.id, "type": "message", "usage": Usage{InputTokens: c.usage.InputTokens},
	}})
	flush()
	sleep(r, a.cfg.FirstToken)
	for left := c.usage.OutputTokens; left > 0; {
		n := min(left, streamChunk)
		sleep(r, time.Duration(n)*a.cfg.PerToken)
		event(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]string{"type": "text_delta", "text": text(n)}})
		flush()
		left -= n
	}
	a.settle(c)
	event(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]string{"stop_reason": "end_turn"}, "usage": c.usage})
	event(w, "message_stop", map[string]string{"type": "message_stop"})
	flush()
}

// streamChunk is how many output tokens one content_block_delta carries.
const streamChunk = 64

// event writes one server-sent event.
func event(w io.Writer, name string, data any) {
	raw, _ := json.Marshal(data) // maps of strings, ints and Usage: never fails
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, raw)
}

// text is n tokens of filler.
func text(n int) string { return strings.Repeat("tok ", n) }

// sleep waits d, or until r's client goes away; the call is charged
// either way.
func sleep(r *http.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// apiError is the body of an error reply.
type apiError struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	var e apiError
	e.Type, e.Error.Type, e.Error.Message = "error", kind, "llmupstream: "+msg
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}
