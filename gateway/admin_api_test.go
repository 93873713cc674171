package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestAdminAPIRefusesMissingOrWrongToken: with a token configured, every
// admin endpoint answers 401 without it or with a wrong one, and changes
// nothing; without a token configured, the mutating endpoints are off.
func TestAdminAPIRefusesMissingOrWrongToken(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{adminToken: "s3cret-token"})
	for path, route := range adminRoutes {
		for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret-tokenX", "s3cret-token", "Basic s3cret-token"} {
			var h []string
			if auth != "" {
				h = []string{"Authorization", auth}
			}
			r := do(t, route.method, "http://"+n.admin+path, `{}`, h...)
			if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with %q: got %d, want 401 with WWW-Authenticate", route.method, path, auth, r.status)
			}
		}
	}
	if r := do(t, "GET", "http://"+n.admin+"/admin/nope", ""); r.status != http.StatusNotFound {
		t.Errorf("an unknown endpoint: got %d, want 404", r.status)
	}
	if r := do(t, "GET", "http://"+n.admin+"/admin/reload", "", "Authorization", "Bearer s3cret-token"); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /admin/reload: got %d, want 405", r.status)
	}

}

// TestAdminOffWithoutToken: a node without an admin token serves its
// probes and its metrics, and nothing else on its admin listener: every
// admin endpoint, reads included, and the admin page answer 403 saying
// that the admin API is off and which variable turns it on.
func TestAdminOffWithoutToken(t *testing.T) {
	open := startNode(t, loadPolicy(t, foundation), nodeOptions{})
	for path, route := range adminRoutes {
		r := do(t, route.method, "http://"+open.admin+path, `{"method":"GET","path":"/","from":"192.0.2.1"}`)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "the admin API is off") || !strings.Contains(r.body, "EDGE_ADMIN_TOKEN") {
			t.Errorf("%s %s without a configured token: got %d %q, want 403 saying the admin API is off", route.method, path, r.status, r.body)
		}
	}
	for path := range adminPageFiles {
		if r := do(t, "GET", "http://"+open.admin+path, ""); r.status != http.StatusForbidden || !strings.Contains(r.body, "EDGE_ADMIN_TOKEN") {
			t.Errorf("GET %s without a configured token: got %d, want 403 naming EDGE_ADMIN_TOKEN", path, r.status)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := do(t, "GET", "http://"+open.admin+path, ""); r.status != http.StatusOK {
			t.Errorf("GET %s without a configured token: got %d, want 200", path, r.status)
		}
	}
}
