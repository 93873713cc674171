package rules_test

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// A success that may be another caller's clears no counter (the markers
// that exempt a caller, which name it exactly, are behaviour/known's
// tests and behaviour/values').

// TestFoldedSpellingClearsNoCounter: under reset_on_success, a success on
// a spelling the counter folds ("René", "RENE") may be another account's
// at an origin that keeps spellings apart: it gives back its own charge
// and clears nothing, so an attacker's own account spelled like the
// victim's never wipes the victim's failures. A success naming the
// account as it is counted clears it (the control).
func TestFoldedSpellingClearsNoCounter(t *testing.T) {
	v := rulestest.NewRun(t, `
identity {
  account = ["json:username"]
}
rule "failures" {
  paths            = ["/login"]
  key              = ["account", "ip"]
  count            = "failures"
  reset_on_success = true
  limit            = 3
  period           = "15m"
}`)
	const ip = "192.0.2.8"
	for range 2 {
		v.Login("rene", ip, "", 401)
	}
	for _, own := range []string{"René", "RENE"} {
		if got := v.Login(own, ip, "", 200); got != rules.Forward {
			t.Fatalf("the own login %q: %v, want forwarded", own, got)
		}
	}
	steps := []rules.Verdict{rules.Forward, rules.RefuseLimit} // the third failure, then locked
	for i, want := range steps {
		if got := v.Login("rene", ip, "", 401); got != want {
			t.Errorf("failure %d at rene after the folded successes: %v, want %v", 3+i, got, want)
		}
	}
	v.Now = v.Now.Add(15 * time.Minute)
	v.Login("rene", ip, "", 401)
	if got := v.Login("rene", ip, "", 200); got != rules.Forward {
		t.Fatalf("rene's own login: %v, want forwarded", got)
	}
	for i := range 3 {
		if got := v.Login("rene", ip, "", 401); got != rules.Forward {
			t.Errorf("failure %d after rene's own success: %v, want forwarded (cleared)", i+1, got)
		}
	}
}
