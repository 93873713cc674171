package ja4_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/basic"
	"github.com/edge-gateway/edge/ja4"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

const (
	chromeJA4 = "t13d1516h2_8daaf6152771_e5627efa2ab1"
	goJA4     = "t13d1312h2_f57a46bbacb6_ab7e3b40a677"
)

func engine(t *testing.T, src string) (*rules.Engine, *rules.Policy) {
	t.Helper()
	p, diags := rules.Load("policies.hcl", []byte(src), basic.Feature(), ja4.Feature())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := rules.NewEngine(rules.EngineOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}

func check(e *rules.Engine, p *rules.Policy, now time.Time, fp string) (rules.Decision, rules.Outcome) {
	s := rules.NewScratch(len(p.Rules))
	req := rules.Request{Method: []byte("POST"), Host: []byte("example.com"), Path: []byte("/login"), Client: netip.MustParseAddr("192.0.2.1")}
	if fp != "" {
		req.JA4 = []byte(fp)
	}
	d := e.Check(context.Background(), now, p, &req, s)
	return d, s.Matches[0].Outcome
}

// TestCharacteristic: each fingerprint its own budget; no fingerprint
// skips even a sensitive rule that rejects a missing identity; one not of
// JA4's shape is decided by invalid_identity.
func TestCharacteristic(t *testing.T) {
	const policy = `
rule "per-ja4" {
  methods = ["POST"]
  paths = ["/login"]
  key = ["ja4"]
  limit = 2
  period = "1m"
  sensitive = true
  missing_identity = "reject"
  %s
}`
	e, p := engine(t, strings.Replace(policy, "%s", "", 1))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		d, o := check(e, p, now, chromeJA4)
		if want := i < 2; (d.Verdict == rules.Forward) != want || (o == rules.OutcomeAllow) != want {
			t.Fatalf("chrome request %d: verdict %v outcome %v", i+1, d.Verdict, o)
		}
	}
	if d, o := check(e, p, now, goJA4); d.Verdict != rules.Forward || o != rules.OutcomeAllow {
		t.Errorf("another fingerprint shares the first one's budget: verdict %v outcome %v", d.Verdict, o)
	}
	for range 5 {
		if d, o := check(e, p, now, ""); d.Verdict != rules.Forward || o != rules.OutcomeSkip {
			t.Fatalf("no fingerprint: verdict %v outcome %v, want forward, skip", d.Verdict, o)
		}
	}
	if d, o := check(e, p, now, "t13d1516h2_NOT-A-JA4"); d.Verdict != rules.RejectInvalid || o != rules.OutcomeInvalid {
		t.Errorf("garbage fingerprint: verdict %v outcome %v, want a reject for invalid_identity", d.Verdict, o)
	}
	e, p = engine(t, strings.Replace(policy, "%s", `invalid_identity = "skip"`, 1))
	if d, o := check(e, p, now, "garbage"); d.Verdict != rules.Forward || o != rules.OutcomeSkip {
		t.Errorf("garbage, invalid_identity = skip: verdict %v outcome %v", d.Verdict, o)
	}
}

// TestAbsentInCompositeKey: a key of ja4 and another characteristic
// skips without a fingerprint, while the other one missing still rejects
// (the other's absence is the client's doing).
func TestAbsentInCompositeKey(t *testing.T) {
	e, p := engine(t, `
rule "r" {
  methods = ["POST"]
  paths = ["/login"]
  key = ["ip", "ja4"]
  limit = 1
  period = "1m"
  sensitive = true
}`)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d, o := check(e, p, now, ""); d.Verdict != rules.Forward || o != rules.OutcomeSkip {
		t.Errorf("verdict %v outcome %v, want forward, skip", d.Verdict, o)
	}
	check(e, p, now, chromeJA4)
	if d, _ := check(e, p, now, chromeJA4); d.Verdict == rules.Forward {
		t.Errorf("second request of one ip and fingerprint was not limited")
	}
}
