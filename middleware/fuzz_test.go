package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/egress-go/egress/middleware"
)

// FuzzKeyByIP checks the X-Forwarded-For parser: it never panics, a key
// is always "ip:" and an address, and an untrusted peer is always keyed
// by itself, whatever it sends.
func FuzzKeyByIP(f *testing.F) {
	f.Add("10.1.2.3:5000", "198.51.100.1, 10.9.9.9")
	f.Add("203.0.113.7:1", "1.1.1.1")
	f.Add("[fd00::1]:443", "2001:db8::1,fd00::2")
	f.Add("10.0.0.1:1", " , ,")
	f.Add("pipe", "")
	key := middleware.KeyByIP(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"))
	f.Fuzz(func(t *testing.T, remote, xff string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = remote
		req.Header.Set("X-Forwarded-For", xff)
		k, err := key(req)
		if err != nil {
			t.Fatalf("KeyByIP returned an error: %v", err)
		}
		if k == "" {
			return
		}
		addr, ok := strings.CutPrefix(k, "ip:")
		if !ok {
			t.Fatalf("key %q does not start with ip:", k)
		}
		if _, err := netip.ParseAddr(addr); err != nil {
			t.Fatalf("key %q holds no address: %v", k, err)
		}
		peer, err := netip.ParseAddrPort(remote)
		if err == nil && !strings.HasPrefix(peer.Addr().Unmap().String(), "10.") && !strings.HasPrefix(peer.Addr().String(), "fd") {
			alone := httptest.NewRequest(http.MethodGet, "/", nil)
			alone.RemoteAddr = remote
			want, _ := key(alone)
			if k != want {
				t.Fatalf("untrusted peer %q keyed %q by its X-Forwarded-For %q; want %q", remote, k, xff, want)
			}
		}
	})
}
