package retryafter

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFieldsAreCanonical guards the lookups, which index the header map
// with these names as they are: a name not in canonical form would never
// match a header that net/http built.
func TestFieldsAreCanonical(t *testing.T) {
	names := []string{keyRetryAfter, keyRetryAfterMs, keyDate, keyAge, keyRateLimit, keyRateLimitPolicy}
	for _, d := range dialects {
		names = append(names, d.fields()...)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, http.CanonicalHeaderKey(name), name)
			assert.LessOrEqual(t, len(name), maxKeyLen)
			assert.NotZero(t, fieldIndex[name])
		})
	}
}

func TestDialectsFitThePresenceBits(t *testing.T) {
	require.LessOrEqual(t, len(dialects), maxDialects)
	for i, d := range dialects {
		assert.NotEmpty(t, d.fields(), "dialect %d (%s) reads no field", i, d.name)
	}
}

// TestScanDoesNotAllocate covers keys in every spelling a header built by
// hand may use.
func TestScanDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name       string
		giveH      http.Header
		wantSet    present
		wantFolded bool
	}{
		{name: "canonical", giveH: http.Header{"Retry-After": {"1"}, "Content-Type": {"x"}}, wantSet: presentRetryAfter},
		{name: "lower case", giveH: http.Header{"retry-after": {"1"}, "x-request-id": {"x"}}, wantSet: presentRetryAfter, wantFolded: true},
		{name: "unrelated lower case", giveH: http.Header{"x-request-id": {"x"}}},
		{name: "dialect", giveH: http.Header{"X-Shopify-Shop-Api-Call-Limit": {"1/40"}}, wantSet: 1 << (len(dialects) - 1)},
		{name: "non-ASCII", giveH: http.Header{"X-Ratelimit-Re\u017fet": {"7"}}, wantSet: presentAll, wantFolded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f fields
			assert.Zero(t, testing.AllocsPerRun(100, func() { f = scan(tt.giveH) }))
			assert.Equal(t, tt.wantSet, f.set)
			assert.Equal(t, tt.wantFolded, f.folded)
		})
	}
}
