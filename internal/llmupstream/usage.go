package llmupstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrNoUsage is returned by [ReadUsage] when a body ends without stating
// its usage.
var ErrNoUsage = errors.New("llmupstream: the body ended without a usage")

// ReadUsage reads a successful reply's body to its end and returns its
// usage: from the JSON [Message], or, when stream is true, from the last
// server-sent event that states one (message_delta, just before the end).
// It returns [ErrNoUsage] when the body states none.
func ReadUsage(body io.Reader, stream bool) (Usage, error) {
	if !stream {
		var m Message
		if err := json.NewDecoder(body).Decode(&m); err != nil {
			return Usage{}, fmt.Errorf("llmupstream: reading the reply: %w", err)
		}
		if m.Type != "message" {
			return Usage{}, ErrNoUsage
		}
		_, err := io.Copy(io.Discard, body)
		return m.Usage, err
	}
	var (
		u     Usage
		found bool
	)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Usage *Usage `json:"usage"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return Usage{}, fmt.Errorf("llmupstream: reading an event: %w", err)
		}
		if ev.Type == "message_delta" && ev.Usage != nil {
			u, found = *ev.Usage, true
		}
	}
	if err := sc.Err(); err != nil {
		return Usage{}, fmt.Errorf("llmupstream: reading the stream: %w", err)
	}
	if !found {
		return Usage{}, ErrNoUsage
	}
	return u, nil
}
