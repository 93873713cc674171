package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/demo"
)

// schemeHeadersSeen returns the origin's headers that an origin reads as
// one of originSchemeHeaders (folded as dropHeader folds names).
func schemeHeadersSeen(l demo.Request) map[string]string {
	out := map[string]string{}
	for k, v := range l.Headers {
		for _, h := range originSchemeHeaders {
			if headerNameIs([]byte(k), h) {
				out[k] = v
			}
		}
	}
	return out
}

// TestForwardedProtoIsTheEdges: through the real server, the origin
// learns the scheme from the edge alone. A client's X-Forwarded-Proto,
// and every header an origin reads as the client's scheme (X-Forwarded-Ssl,
// Front-End-Https, X-Url-Scheme, in any spelling), never reaches it from an
// untrusted peer: a plain-HTTP client claiming https would otherwise get an
// origin's secure-only treatment (Django's SECURE_PROXY_SSL_HEADER,
// Express's req.secure). A trusted proxy's own X-Forwarded-Proto is
// passed on; over the edge's TLS listener the origin hears https.
func TestForwardedProtoIsTheEdges(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	spoofs := []string{
		"X-Forwarded-Port", "443", "X_Forwarded_Prefix", "/admin",
		"X-Forwarded-Proto", "https", "X_Forwarded_Proto", "https", "x.forwarded.proto", "https",
		"X-Forwarded-Ssl", "on", "Front-End-Https", "on", "X-Url-Scheme", "https", "X-Forwarded-Scheme", "https",
	}
	t.Run("untrusted peer", func(t *testing.T) {
		n := startNode(t, loadPolicy(t, "policies.hcl", `trusted_proxies = ["127.0.0.1/32", "::1/128"]`, `trusted_proxies = []`), nodeOptions{clock: clock})
		if r := do(t, "GET", "http://"+n.addr+"/api/orders", "", spoofs...); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		l := n.last(t)
		seen := schemeHeadersSeen(l)
		if len(seen) != 1 || seen["X-Forwarded-Proto"] != "http" {
			t.Errorf("the origin saw %v, want only X-Forwarded-Proto: http", seen)
		}
		for k := range l.Headers {
			if headerNameIs([]byte(k), "x-forwarded-port") || headerNameIs([]byte(k), "x-forwarded-prefix") {
				t.Errorf("the origin received the client's %s", k)
			}
		}
	})
	t.Run("trusted proxy", func(t *testing.T) {
		n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: clock})
		for _, c := range []struct{ sent, want string }{
			{"https", "https"}, {"HTTPS", "https"}, {"http, https", "https"}, {"https, http", "http"},
			{"gopher", "http"}, {"", "http"},
		} {
			h := []string{"X-Forwarded-For", "198.51.100.7", "X-Forwarded-Ssl", "on"}
			if c.sent != "" {
				h = append(h, "X-Forwarded-Proto", c.sent)
			}
			if r := do(t, "GET", "http://"+n.addr+"/api/orders", "", h...); r.status != 200 {
				t.Fatalf("%q: status %d", c.sent, r.status)
			}
			seen := schemeHeadersSeen(n.last(t))
			if len(seen) != 1 || seen["X-Forwarded-Proto"] != c.want {
				t.Errorf("proxy sent %q: the origin saw %v, want only X-Forwarded-Proto: %s", c.sent, seen, c.want)
			}
		}
	})
	t.Run("proxy's own line after the client's", func(t *testing.T) {
		// A trusted proxy that appends its line (HAProxy's add-header)
		// after the client's copy: the proxy's, the last, is the truth.
		n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: clock})
		resp := raw(t, n.addr, "GET /api/orders HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 198.51.100.9\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Proto: http\r\nConnection: close\r\n\r\n")
		if rawStatus(t, resp) != 200 {
			t.Fatalf("answer %q", resp)
		}
		if seen := schemeHeadersSeen(n.last(t)); len(seen) != 1 || seen["X-Forwarded-Proto"] != "http" {
			t.Errorf("the origin saw %v, want only X-Forwarded-Proto: http (the proxy's own, last, line)", seen)
		}
	})
	t.Run("TLS listener", func(t *testing.T) {
		n := startTLSNode(t, "policies.hcl", "127.0.0.1", 0, false)
		resp := n.rawTLS(t, "GET /api/orders HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 198.51.100.8\r\nX_Forwarded_Proto: http\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(resp, "HTTP/1.1 200") {
			t.Fatalf("answer %q", resp)
		}
		var l demo.Request
		if err := json.Unmarshal([]byte(do(t, "GET", "http://"+n.oaddr+"/__origin/last", "").body), &l); err != nil {
			t.Fatal(err)
		}
		if seen := schemeHeadersSeen(l); len(seen) != 1 || seen["X-Forwarded-Proto"] != "https" {
			t.Errorf("over TLS the origin saw %v, want only X-Forwarded-Proto: https", seen)
		}
	})
}
