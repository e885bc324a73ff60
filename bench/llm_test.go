package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/egress-go/egress/internal/llmupstream"
)

func TestLLMBinding(t *testing.T) {
	tests := []struct {
		name      string
		giveLimit llmupstream.Limits
		wantName  string
		wantLeast time.Duration // before the reply's generation time
	}{
		{
			// 600 prompts: 600 requests, ~600k input, ~180k output.
			name:      "output binds",
			giveLimit: llmupstream.Limits{Requests: 200, InputTokens: 150_000, OutputTokens: 30_000, Period: time.Second},
			wantName:  "output tokens", wantLeast: 5 * time.Second,
		},
		{
			name:      "requests bind",
			giveLimit: llmupstream.Limits{Requests: 10, InputTokens: 150_000, OutputTokens: 30_000, Period: time.Second},
			wantName:  "requests", wantLeast: 59 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := llmBatch(false)
			sc.limits = tt.giveLimit
			sc.firstToken, sc.perToken = 0, 0
			b, least := sc.binding()
			assert.Equal(t, tt.wantName, b.name)
			assert.InDelta(t, tt.wantLeast.Seconds(), least.Seconds(), 0.2)
		})
	}
}

func TestLLMShare(t *testing.T) {
	sc := llmBatch(false)
	b, _ := sc.binding()
	// A client that used exactly a minute's worth plus the rate for its
	// wall time used all of it.
	r := llmRow{wall: 4 * time.Second, stats: llmupstream.Stats{OutputTokens: 5 * b.limit}}
	assert.InDelta(t, 1.0, sc.share(r), 1e-9)
	r.stats.OutputTokens = b.limit
	assert.InDelta(t, 0.2, sc.share(r), 1e-9)
}
