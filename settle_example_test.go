package egress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/internal/llmupstream"
	"github.com/egress-go/egress/throttle"
)

// An LLM API limits requests, input tokens and output tokens: book the
// estimate, {1, prompt tokens, max_tokens}, and settle to the usage once
// the reply states it.
func ExampleSettle() {
	api, err := llmupstream.New(llmupstream.Config{
		Limits: llmupstream.Limits{Requests: 50, InputTokens: 30000, OutputTokens: 8000, Period: 24 * time.Hour},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	var parts []throttle.Limiter
	for _, n := range []int{50, 30000, 8000} {
		tb, err := throttle.NewTokenBucket(throttle.Rate{N: n, Per: 24 * time.Hour}, n)
		if err != nil {
			panic(err)
		}
		parts = append(parts, tb)
	}
	client := egress.NewClient(
		egress.WithLimiter(throttle.All(parts...)), // requests, input tokens, output tokens
		egress.WithEstimate(func(req *http.Request) ([]int, error) {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			defer body.Close()
			var r llmupstream.Request
			if err := json.NewDecoder(body).Decode(&r); err != nil {
				return nil, err
			}
			return []int{1, r.PromptTokens, r.MaxTokens}, nil
		}),
	)
	defer client.CloseIdleConnections()
	output := func() int {
		st, err := parts[2].(throttle.Inspector).Inspect(context.Background(), srvKey(nil, srv.URL))
		if err != nil {
			panic(err)
		}
		return st.Remaining
	}

	body := []byte(`{"prompt_tokens": 1200, "max_tokens": 1000, "seed": 7, "stream": true}`)
	resp, err := client.Post(srv.URL+llmupstream.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println("output tokens left, max_tokens booked:", output())
	u, err := llmupstream.ReadUsage(resp.Body, true) // the usage comes in the last events
	if err != nil {
		panic(err)
	}
	if err := egress.Settle(resp, 1, u.InputTokens, u.OutputTokens); err != nil {
		panic(err)
	}
	fmt.Println("output tokens used:", u.OutputTokens)
	fmt.Println("output tokens left, settled:", output())
	// Output:
	// output tokens left, max_tokens booked: 7000
	// output tokens used: 293
	// output tokens left, settled: 7707
}
