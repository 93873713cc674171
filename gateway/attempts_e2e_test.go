package gateway

import (
	"fmt"
	"net/http"
	"testing"
)

// TestRefusedAttemptsMakeNoKeys (a tester's finding F1 on issue 24): an
// attempts op charges a key that exists even when the request is refused,
// but a refused request makes no new key. Through the real server on the
// shipped policy: an attacker spends otp-verify-per-client's 60 an hour,
// then sends 100 more verifies, each naming a fresh phone and challenge.
// Each is refused (429). Before, each made a key in otp-verify-per-phone
// and otp-verify-per-session (count = "attempts"), filling their budgets
// (and its network's share of them) with keys no request was ever allowed
// on: 160 keys each. Now they hold the 60 of the allowed attempts. The
// controls: a refused attempt still charges a phone that exists (a phone
// the attacker keeps guessing at is refused for everyone), and requests
// rejected with 400 (a missing challenge) are still charged to the
// per-client rule, from the first one on.
func TestRefusedAttemptsMakeNoKeys(t *testing.T) {
	n := startShippedNode(t, 100000, nil)
	verify := func(client, phone, challenge string) int {
		t.Helper()
		body := `{"phone":"` + phone + `","code":"000000"`
		if challenge != "" {
			body += `,"challenge_id":"` + challenge + `"`
		}
		return do(t, "POST", "http://"+n.addr+"/otp/verify", body+"}", "X-Forwarded-For", client).status
	}
	const attacker = "198.51.100.7"
	for i := range 60 {
		if got := verify(attacker, sharePhone(i), fmt.Sprintf("chal-%d", i)); got == http.StatusTooManyRequests {
			t.Fatalf("the attacker's verify %d: got 429, want the origin's answer", i+1)
		}
	}
	for i := range 100 {
		if got := verify(attacker, sharePhone(100+i), fmt.Sprintf("fresh-%d", i)); got != http.StatusTooManyRequests {
			t.Fatalf("the attacker's verify %d past otp-verify-per-client: got %d, want 429", 61+i, got)
		}
	}
	for _, rule := range []string{"otp-verify-per-phone", "otp-verify-per-session"} {
		if got := metric(t, n.reg, "edge_store_keys", rule); got != 60 {
			t.Errorf("edge_store_keys{%s}: got %v, want 60 (the refused requests' fresh keys made)", rule, got)
		}
	}

	// A phone that exists is charged by refused attempts: 14 more on
	// phone 0 (one allowed before) spend its 15 an hour, for everyone.
	for range 14 {
		verify(attacker, sharePhone(0), "chal-0")
	}
	if got := verify("203.0.113.9", sharePhone(0), "another"); got != http.StatusTooManyRequests {
		t.Errorf("another client's verify on the phone the attacker kept guessing at: got %d, want 429 (otp-verify-per-phone)", got)
	}

	// Malformed requests (no challenge: 400) are charged to the client's
	// rule: 60 of them spend its hour, and the next valid verify is
	// refused.
	const garbage = "192.0.2.77"
	for i := range 60 {
		if got := verify(garbage, sharePhone(300+i), ""); got != http.StatusBadRequest {
			t.Fatalf("malformed verify %d: got %d, want 400", i+1, got)
		}
	}
	if got := verify(garbage, sharePhone(400), "valid"); got != http.StatusTooManyRequests {
		t.Errorf("a valid verify after 60 malformed ones: got %d, want 429 (otp-verify-per-client charged by the 400s)", got)
	}
}
