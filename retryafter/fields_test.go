package retryafter

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKeysAreCanonical guards the lookups, which index the header map with
// these keys as they are: a key not in canonical form would never match a
// header that net/http built.
func TestKeysAreCanonical(t *testing.T) {
	for _, key := range []string{
		keyRetryAfter, keyRetryAfterMs, keyDate, keyAge,
		keyRateLimit, keyRateLimitPolicy, keyRateLimitLimit, keyRateLimitRemaining, keyRateLimitReset,
		keyXRateLimitResource, keyXRateLimitBucket, keyXRateLimitLimit,
		keyXRateLimitRemaining, keyXRateLimitReset, keyXRateLimitResetAfter,
		keyXRateLimitDashLimit, keyXRateLimitDashRemaining, keyXRateLimitDashReset,
		keyOpenAILimitRequests, keyOpenAIRemainingRequests, keyOpenAIResetRequests,
		keyOpenAILimitTokens, keyOpenAIRemainingTokens, keyOpenAIResetTokens,
		keyAnthropicRequestsLimit, keyAnthropicRequestsRemaining, keyAnthropicRequestsReset,
		keyAnthropicTokensLimit, keyAnthropicTokensRemaining, keyAnthropicTokensReset,
		keyAnthropicInputTokensLimit, keyAnthropicInputTokensRemaining, keyAnthropicInputTokensReset,
		keyAnthropicOutputTokensLimit, keyAnthropicOutputTokensRemaining, keyAnthropicOutputTokensReset,
		keyShopifyCallLimit,
	} {
		t.Run(key, func(t *testing.T) {
			assert.Equal(t, http.CanonicalHeaderKey(key), key)
			assert.NotZero(t, groupOf(key))
			assert.True(t, mayFold(key), "mayFold must let every spelling of the key through")
		})
	}
}
