package gateway

import (
	"fmt"
	"testing"
	"time"
)

// TestKeyedHeaderSpellingsNeverReachTheOrigin: through the real server with
// the shipped policies.hcl, another spelling of the header api-per-key
// counts on (X_Api_Key, X.Api.Key, x-api_key: CGI, PHP, WSGI and Rack read
// each as HTTP_X_API_KEY) is stripped before forwarding, so the origin
// never receives a key the edge did not count; the spelling the edge reads
// is held to its limit (found by trying the edge as an attacker would,
// issue 9).
func TestKeyedHeaderSpellingsNeverReachTheOrigin(t *testing.T) {
	for _, name := range []string{"X_Api_Key", "X.Api.Key", "x-api_key"} {
		t.Run(name, func(t *testing.T) {
			n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
			for i := range 40 {
				r := do(t, "GET", "http://"+n.addr+"/api/orders", "", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1), name, "victim-key-0123")
				if r.status != 200 {
					continue
				}
				for k, v := range n.last(t).Headers {
					if v == "victim-key-0123" {
						t.Fatalf("request %d: the origin received the uncounted key as %s", i, k)
					}
				}
			}
		})
	}
	n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	passed := 0
	for i := range 40 {
		if r := do(t, "GET", "http://"+n.addr+"/api/orders", "", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1), "X-Api-Key", "victim-key-0123"); r.status == 200 {
			passed++
		}
	}
	if passed != 20 {
		t.Errorf("X-Api-Key: %d of 40 passed, want 20 (api-per-key's burst)", passed)
	}
}
