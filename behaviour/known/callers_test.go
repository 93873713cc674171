package known_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// Markers that exempt a caller name it exactly (rules.CallerCharacteristic,
// docs/policy.md, "known"), and a known block may require another live
// marker of the same caller before it records one.

// exactCallerPolicy is rulestest.KnownRules with a one-source account.
const exactCallerPolicy = `
identity {
  account = ["json:username"]
}
` + rulestest.KnownRules

// TestKnownMarkersNameTheAccountAsSent: a success on "rené" (an account of
// its own at an origin that keeps accents apart) or "Rene" (at one that
// keeps case apart) makes the attacker's browser known for that spelling
// alone, by known_visitors and by a known block: at the victim's "rene",
// whose failure counter it shares, it is held as anyone is. The browser
// that logged in as "rene" is known there (the control).
func TestKnownMarkersNameTheAccountAsSent(t *testing.T) {
	for _, own := range []string{"rené", "Rene", " rene"} {
		t.Run(own, func(t *testing.T) {
			v := newValuesRun(t, exactCallerPolicy)
			if got := v.login("192.0.2.1", rulestest.AccountBody(own), "attacker", 200); got != rules.Forward {
				t.Fatalf("the attacker's own login: %v, want forwarded", got)
			}
			if got := v.login("203.0.113.1", rulestest.AccountBody("rene"), "victim", 200); got != rules.Forward {
				t.Fatalf("the victim's login: %v, want forwarded", got)
			}
			v.login("198.51.100.1", rulestest.AccountBody("rene"), "stranger", 401) // the victim's one failure: locked
			if got := v.login("192.0.2.1", rulestest.AccountBody("rene"), "attacker", 401); got != rules.RefuseLimit {
				t.Errorf("the attacker's browser at the victim's account: %v, want refused (known for %q only)", got, own)
			}
			if got := v.login("192.0.2.1", rulestest.AccountBody(own), "attacker", 401); got != rules.Forward {
				t.Errorf("the attacker's browser at its own %q: %v, want forwarded (known for it)", own, got)
			}
			if got := v.login("203.0.113.1", rulestest.AccountBody("rene"), "victim", 401); got != rules.Forward {
				t.Errorf("the victim's browser at its locked account: %v, want forwarded (known)", got)
			}
			// per-network: 3 an hour per /24; the attacker's /24 has spent
			// one (its first login, not known yet) and two more here
			// fill it.
			v.login("192.0.2.2", rulestest.AccountBody("zed"), "other", 200)
			v.login("192.0.2.3", rulestest.AccountBody("yan"), "other2", 200)
			if got := v.login("192.0.2.1", rulestest.AccountBody("rene"), "attacker", 200); got != rules.RefuseLimit {
				t.Errorf("the attacker's browser at the victim's account through a full network: %v, want refused (not known: exempt_known holds)", got)
			}
			if got := v.login("192.0.2.1", rulestest.AccountBody(own), "attacker", 200); got != rules.Forward {
				t.Errorf("the attacker's browser at its own %q through a full network: %v, want forwarded", own, got)
			}
		})
	}
}

// TestKnownBrowserIsKnownWhereverItLogsIn: a browser known for its
// account is known from another address of its network, or of another
// network, by known_visitors and by a known block: its marker names its
// visitor ID, not its address (a carrier's pool, a DHCP lease). Its
// counters are its address's (the control: another account, or a
// cookieless client at the browser's first address, is not known).
func TestKnownBrowserIsKnownWhereverItLogsIn(t *testing.T) {
	v := newValuesRun(t, exactCallerPolicy)
	if got := v.login("203.0.113.10", rulestest.AccountBody("carol"), "browser", 200); got != rules.Forward {
		t.Fatalf("the browser's login: %v, want forwarded", got)
	}
	v.login("198.51.100.1", rulestest.AccountBody("carol"), "stranger", 401) // carol locked for everyone else
	v.login("203.0.113.50", rulestest.AccountBody("x"), "other", 200)        // the /24's hour: two of 3
	v.login("203.0.113.51", rulestest.AccountBody("y"), "other2", 200)       // full
	for _, from := range []string{"203.0.113.11", "198.18.0.7"} {
		if got := v.login(from, rulestest.AccountBody("carol"), "browser", 401); got != rules.Forward {
			t.Errorf("the known browser from %s at its locked account: %v, want forwarded (known_visitors)", from, got)
		}
	}
	if got := v.login("203.0.113.11", rulestest.AccountBody("carol"), "browser", 200); got != rules.Forward {
		t.Errorf("the known browser from a new address of its full network: %v, want forwarded (exempt_known)", got)
	}
	if got := v.login("203.0.113.11", rulestest.AccountBody("dave"), "browser", 200); got != rules.RefuseLimit {
		t.Errorf("the known browser at another account through its full network: %v, want refused", got)
	}
	if got := v.login("203.0.113.10", rulestest.AccountBody("carol"), "", 401); got != rules.RefuseLimit {
		t.Errorf("a cookieless client at the browser's first address: %v, want refused (never the browser)", got)
	}
}

// TestKnownBlockRequiresALiveMarker: a known block with requires records
// a caller only when the required block's marker for the request's own
// values was live before it: a verify naming a phone no code was sent to
// makes it known to nothing, whatever the origin answers; one naming a
// phone a code was sent to within the required block's for does. Without
// the send's success (the origin refused it), nothing is recorded either.
func TestKnownBlockRequiresALiveMarker(t *testing.T) {
	v := newValuesRun(t, `
identity {
  phone = ["json:phone"]
}
known "code-sent" {
  paths = ["/otp/send"]
  by    = ["phone"]
  for   = "15m"
}
known "verified-phone" {
  paths    = ["/otp/verify"]
  by       = ["phone"]
  for      = "30d"
  requires = ["code-sent"]
}
rule "per-range" {
  paths        = ["/otp/send"]
  key          = ["phone_range"]
  limit        = 3
  period       = "1h"
  exempt_known = ["verified-phone"]
}`)
	phone := func(p string) string { return fmt.Sprintf(`{"phone":%q}`, p) }
	send := func(p string, status int) rules.Verdict {
		t.Helper()
		return v.send("/otp/send", "192.0.2.9", phone(p), "", status).Verdict
	}
	verify := func(p string) { v.send("/otp/verify", "192.0.2.9", phone(p), "", 200) }

	verify("+12025550101") // no code was sent to it
	send("+12025550102", 503)
	verify("+12025550102") // its send failed at the origin
	send("+12025550103", 200)
	v.Now = v.Now.Add(16 * time.Minute)
	verify("+12025550103") // its code-sent marker has ended
	send("+12025550104", 200)
	verify("+12025550104") // the one phone that becomes known
	// per-range: three an hour for the block, spent by the sends above
	// (the 503's charge stands too: count = "requests").
	for _, p := range []string{"+12025550101", "+12025550102", "+12025550103"} {
		if got := send(p, 200); got != rules.RefuseLimit {
			t.Errorf("a send to %s through the full block: %v, want refused (not known)", p, got)
		}
	}
	if got := send("+12025550104", 200); got != rules.Forward {
		t.Errorf("a send to the phone verified after its code: %v, want forwarded (known)", got)
	}
}
