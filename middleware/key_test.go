package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/egress-go/egress"
	"github.com/egress-go/egress/middleware"
)

func TestKeyByHeader(t *testing.T) {
	// The client hashes API keys the same way, so both ends name a key alike.
	clientReq := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
	clientReq.Header.Set("X-Api-Key", "s3cret")
	wantHashed := egress.KeyByHeader("X-Api-Key")(clientReq)
	require.True(t, strings.HasPrefix(wantHashed, "X-Api-Key#"))

	tests := []struct {
		name     string
		giveVal  string
		wantKey  string
		wantLong bool
	}{
		{name: "hashed", giveVal: "s3cret", wantKey: wantHashed},
		{name: "absent", giveVal: "", wantKey: ""},
		{name: "at the bound", giveVal: strings.Repeat("k", middleware.MaxKeyLen), wantKey: "X-Api-Key#"},
		{name: "too long", giveVal: strings.Repeat("k", middleware.MaxKeyLen+1), wantLong: true},
	}
	f := middleware.KeyByHeader("x-api-key")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
			if tt.giveVal != "" {
				req.Header.Set("X-Api-Key", tt.giveVal)
			}
			key, err := f(req)
			assert.Equal(t, tt.wantLong, err != nil, "err: %v", err)
			assert.ErrorIs(t, err, map[bool]error{true: middleware.ErrKeyTooLong}[tt.wantLong])
			assert.True(t, strings.HasPrefix(key, tt.wantKey), "key %q", key)
			assert.NotContains(t, key, "s3cret")
			assert.NotContains(t, key, "kkkk")
		})
	}
}

func TestKeyByUser(t *testing.T) {
	tests := []struct {
		name     string
		giveUser string
		wantKey  string
		wantErr  error
	}{
		{name: "user", giveUser: "alice", wantKey: "user:alice"},
		{name: "anonymous", giveUser: "", wantKey: ""},
		{name: "too long", giveUser: strings.Repeat("u", middleware.MaxKeyLen), wantErr: middleware.ErrKeyTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := middleware.KeyByUser(func(*http.Request) string { return tt.giveUser })
			key, err := f(httptest.NewRequest(http.MethodGet, "http://api.test/", nil))
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, tt.wantKey, key)
		})
	}
}

func TestKeyByIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name       string
		giveRemote string
		giveXFF    []string
		wantKey    string
	}{
		{name: "no proxy", giveRemote: "203.0.113.7:5000", wantKey: "ip:203.0.113.7"},
		{name: "untrusted peer's XFF is ignored", giveRemote: "203.0.113.7:5000", giveXFF: []string{"198.51.100.1"}, wantKey: "ip:203.0.113.7"},
		{name: "trusted peer: rightmost entry", giveRemote: "10.1.2.3:5000", giveXFF: []string{"198.51.100.1"}, wantKey: "ip:198.51.100.1"},
		{name: "spoofed entries left of the real client are ignored", giveRemote: "10.1.2.3:5000", giveXFF: []string{"1.1.1.1, 2.2.2.2, 198.51.100.1"}, wantKey: "ip:198.51.100.1"},
		{name: "trusted hops are skipped", giveRemote: "10.1.2.3:5000", giveXFF: []string{"198.51.100.1, 10.9.9.9"}, wantKey: "ip:198.51.100.1"},
		{name: "several header lines", giveRemote: "10.1.2.3:5000", giveXFF: []string{"198.51.100.1", "10.9.9.9"}, wantKey: "ip:198.51.100.1"},
		{name: "every hop trusted: the leftmost", giveRemote: "10.1.2.3:5000", giveXFF: []string{"10.5.5.5, 10.9.9.9"}, wantKey: "ip:10.5.5.5"},
		{name: "trusted peer without XFF", giveRemote: "10.1.2.3:5000", wantKey: "ip:10.1.2.3"},
		{name: "garbage from a proxy: the last hop read", giveRemote: "10.1.2.3:5000", giveXFF: []string{"1.1.1.1, bogus, 10.9.9.9"}, wantKey: "ip:10.9.9.9"},
		{name: "IPv6 by its /64", giveRemote: "[2001:db8:1:2:3:4:5:6]:443", wantKey: "ip:2001:db8:1:2::"},
		{name: "IPv4-mapped IPv6", giveRemote: "[::ffff:203.0.113.7]:443", wantKey: "ip:203.0.113.7"},
		{name: "unreadable RemoteAddr", giveRemote: "pipe", wantKey: ""},
	}
	f := middleware.KeyByIP(proxies...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
			req.RemoteAddr = tt.giveRemote
			for _, v := range tt.giveXFF {
				req.Header.Add("X-Forwarded-For", v)
			}
			key, err := f(req)
			require.NoError(t, err)
			assert.Equal(t, tt.wantKey, key)
		})
	}
}

func TestKeyFuncsPanicOnProgrammerErrors(t *testing.T) {
	tests := []struct {
		name string
		give func()
		want string
	}{
		{name: "empty header", give: func() { middleware.KeyByHeader("") }, want: "middleware: KeyByHeader given an empty header name"},
		{name: "nil user func", give: func() { middleware.KeyByUser(nil) }, want: "middleware: KeyByUser given a nil func"},
		{name: "invalid prefix", give: func() { middleware.KeyByIP(netip.Prefix{}) }, want: "middleware: KeyByIP given an invalid prefix (#0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.give)
		})
	}
}

// TestKeyByIPAddressForms: a RemoteAddr without a port, as chi's RealIP
// and gorilla's ProxyHeaders leave it, and X-Forwarded-For entries with a
// port, as Azure's proxies write them, are each client's own address:
// read as unreadable, every client shared one budget ("ip:unknown", or
// the proxy's).
func TestKeyByIPAddressForms(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name       string
		giveRemote string
		giveXFF    string
		wantKey    string
	}{
		{name: "RemoteAddr without port", giveRemote: "203.0.113.7", wantKey: "ip:203.0.113.7"},
		{name: "IPv6 RemoteAddr without port", giveRemote: "2001:db8:1:2::5", wantKey: "ip:2001:db8:1:2::"},
		{name: "XFF entry with a port", giveRemote: "10.1.2.3:5000", giveXFF: "198.51.100.1:4711", wantKey: "ip:198.51.100.1"},
		{name: "XFF IPv6 entry with a port", giveRemote: "10.1.2.3:5000", giveXFF: "[2001:db8:1:2::5]:4711", wantKey: "ip:2001:db8:1:2::"},
		{name: "trusted XFF entry with a port is skipped", giveRemote: "10.1.2.3:5000", giveXFF: "198.51.100.1:1, 10.9.9.9:2", wantKey: "ip:198.51.100.1"},
	}
	f := middleware.KeyByIP(proxies...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
			req.RemoteAddr = tt.giveRemote
			if tt.giveXFF != "" {
				req.Header.Set("X-Forwarded-For", tt.giveXFF)
			}
			key, err := f(req)
			require.NoError(t, err)
			assert.Equal(t, tt.wantKey, key)
		})
	}
}
