package sendtime

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStamp(t *testing.T) {
	var got time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = Of(r)
	}))
	defer srv.Close()

	before := time.Now()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := Stamp(nil).RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()

	assert.Empty(t, req.Header.Get(Header), "the caller's request is not modified")
	assert.False(t, got.Before(before.Truncate(0)), "stamped at or after the call began")
}

func TestOfWithoutStamp(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	assert.True(t, Of(req).IsZero())
}
