package llmupstream_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/egress-go/egress/internal/llmupstream"
)

func Example() {
	api, err := llmupstream.New(llmupstream.Config{
		// Anthropic's tier-1 limits, with the minute compressed to a second.
		Limits: llmupstream.Limits{Requests: 50, InputTokens: 30000, OutputTokens: 8000, Period: time.Second},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	for _, body := range []string{
		`{"prompt_tokens": 1200, "max_tokens": 1000, "seed": 7}`,
		`{"prompt_tokens": 1200, "max_tokens": 1000, "seed": 7, "stream": true}`,
	} {
		resp, err := http.Post(srv.URL+llmupstream.Path, "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		stream := resp.Header.Get("Content-Type") == "text/event-stream"
		u, err := llmupstream.ReadUsage(resp.Body, stream)
		resp.Body.Close()
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d stream=%v input_tokens=%d output_tokens=%d output-tokens-limit=%s\n",
			resp.StatusCode, stream, u.InputTokens, u.OutputTokens, resp.Header.Get("anthropic-ratelimit-output-tokens-limit"))
	}
	st := api.Stats()
	fmt.Printf("admitted %d requests, %d input and %d output tokens; %d 429s\n", st.Requests, st.InputTokens, st.OutputTokens, st.TooMany)
	// Output:
	// 200 stream=false input_tokens=1200 output_tokens=293 output-tokens-limit=8000
	// 200 stream=true input_tokens=1200 output_tokens=293 output-tokens-limit=8000
	// admitted 2 requests, 2400 input and 586 output tokens; 0 429s
}
