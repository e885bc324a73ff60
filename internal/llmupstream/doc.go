// Package llmupstream is an LLM API simulator for the examples and the
// bench: an [http.Handler] that enforces requests, input tokens and output
// tokens per minute the way Anthropic documents its rate limits, and
// answers with the usage of each call in its body, at the very end when
// streamed.
//
// The limits are three token buckets. Each holds up to its limit and
// refills continuously at limit per [Limits.Period] (a minute by default;
// the examples and the bench compress it to seconds). A request is admitted
// only if, when it arrives, every bucket holds what it asks for: 1 request,
// its prompt_tokens of input, and its max_tokens of output, since the
// output is not known yet. When the response is complete, the output
// bucket gets back what max_tokens overestimated. Beyond the limits the
// API answers 429 with retry-after.
//
// The wire format is small and fixed. A request is a POST to
// /v1/messages with the JSON body [Request]:
//
//	{"prompt_tokens": 1200, "max_tokens": 1000, "seed": 7, "stream": false}
//
// The reply is the JSON body [Message], whose usage holds input_tokens
// (the prompt_tokens) and output_tokens, drawn from 10–50% of max_tokens
// by the request's seed (or the server's, when the request has none; see
// [Output]). With "stream": true the reply is server-sent events, as
// Anthropic streams them:
//
//	event: message_start        usage with input_tokens, output_tokens 0
//	event: content_block_delta  (several; the text, in pieces)
//	event: message_delta        usage with input_tokens and output_tokens: the final count
//	event: message_stop
//
// so the final usage arrives in the last event but one, just before the
// body ends. [ReadUsage] reads either form.
//
// Every reply to a well-formed request, 429s included, carries
// anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}:
// remaining is what the bucket holds after this request's booking, and
// reset is when it will be full again, in RFC 3339 with fractional
// seconds (the compressed periods make whole seconds too coarse). For the
// same reason the API sends no Date header, so that clients measure the
// resets from their own clock, which on loopback is the API's. A 429
// also carries retry-after, in whole seconds rounded up, as Anthropic
// sends it: with a period compressed from a minute to a second, one
// second of retry-after stands for a minute.
//
// [API.Stats] counts what the API admitted and refused, in all and per
// period, so that programs can check their claims against it.
package llmupstream
