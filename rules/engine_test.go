package rules_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
)

// fields and req are rulestest's request fields and request, by the short
// names the tables use.
type (
	fields = rulestest.Fields
	req    = rulestest.Req
)

func check(e *rules.Engine, p *rules.Policy, r req, s *rules.Scratch) rules.Decision {
	return e.Check(context.Background(), rulestest.T0, p, r.Build(), s)
}

func TestEngineDenyAction(t *testing.T) {
	p := rulestest.Load(t, `
rule "block-admin" {
  paths  = ["/admin/*"]
  action = "deny"
}
rule "block-otp-abroad" {
  paths     = ["/otp/*"]
  action    = "deny"
  sensitive = true
}
rule "count-otp" {
  paths = ["/otp/*"]
  key   = ["ip"]
  limit = 1
  period = "1h"
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	if d := check(e, p, req{Method: "GET", Path: "/admin/users", Client: "192.0.2.1"}, s); d.Verdict != rules.RefuseForbidden || d.Refusing.Name != "block-admin" {
		t.Errorf("admin: got verdict %d by %v, want 403 by block-admin", d.Verdict, d.Refusing)
	}
	if d := check(e, p, req{Method: "GET", Path: "/api", Client: "192.0.2.1"}, s); d.Verdict != rules.Forward {
		t.Errorf("api: got verdict %d", d.Verdict)
	}
	// A sensitive deny answers as a limit refusal (bare 429), and the
	// refused request consumes nothing from the counting rule: twice
	// refused, the one-an-hour counter is still unused.
	for range 2 {
		if d := check(e, p, req{Method: "POST", Path: "/otp/send", Client: "192.0.2.1"}, s); d.Verdict != rules.RefuseLimit || !d.Sensitive {
			t.Errorf("otp: got verdict %d sensitive %v, want bare 429", d.Verdict, d.Sensitive)
		}
	}
	p2 := rulestest.Load(t, `
rule "count-otp" {
  paths = ["/otp/*"]
  key   = ["ip"]
  limit = 1
  period = "1h"
}
`)
	if d := check(e, p2, req{Method: "POST", Path: "/otp/send", Client: "192.0.2.1"}, s); d.Verdict != rules.Forward {
		t.Errorf("counter was consumed by refused requests: verdict %d", d.Verdict)
	}
}

func TestEngineMissingIdentity(t *testing.T) {
	p := rulestest.Load(t, `
rule "per-key" {
  paths = ["/api/*"]
  key   = ["header:X-Api-Key"]
  limit = 1
  period = "1m"
}
rule "per-key-sensitive" {
  paths     = ["/login"]
  key       = ["query:client"]
  limit     = 100
  period    = "1m"
  sensitive = true
}
rule "per-ip-attempts" {
  paths  = ["/login"]
  key    = ["ip"]
  limit  = 2
  period = "1m"
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	// Absent on an ordinary rule: skipped, never a shared empty key.
	for range 3 {
		d := check(e, p, req{Method: "GET", Path: "/api/x", Client: "192.0.2.1"}, s)
		if d.Verdict != rules.Forward || s.Matches[0].Outcome != rules.OutcomeSkip {
			t.Fatalf("got verdict %d outcome %v, want forward/skip", d.Verdict, s.Matches[0].Outcome)
		}
	}
	// Present: counted per value.
	for i, want := range []rules.Verdict{rules.Forward, rules.RefuseLimit} {
		d := check(e, p, req{Method: "GET", Path: "/api/x", Client: "192.0.2.1", Fields: fields{HeaderValues: map[string]string{"X-Api-Key": "k1"}}}, s)
		if d.Verdict != want {
			t.Errorf("k1 #%d: got %d, want %d", i, d.Verdict, want)
		}
	}
	if d := check(e, p, req{Method: "GET", Path: "/api/x", Client: "192.0.2.1", Fields: fields{HeaderValues: map[string]string{"X-Api-Key": "k2"}}}, s); d.Verdict != rules.Forward {
		t.Errorf("k2: got %d", d.Verdict)
	}
	// Absent on a sensitive rule: 400, and the per-client rule is charged
	// as an attempt, so garbage floods are still limited.
	for i, want := range []rules.Verdict{rules.RejectMissing, rules.RejectMissing, rules.RefuseLimit} {
		d := check(e, p, req{Method: "POST", Path: "/login", Client: "192.0.2.9"}, s)
		if d.Verdict != want {
			t.Errorf("missing #%d: got verdict %d, want %d", i, d.Verdict, want)
		}
	}
}

func TestEngineDryRunRuleNeverChangesOthers(t *testing.T) {
	p := rulestest.Load(t, `
rule "tight-shadow" {
  paths   = ["/api/*"]
  key     = ["ip"]
  limit   = 1
  period  = "1m"
  dry_run = true
}
rule "loose" {
  paths  = ["/api/*"]
  key    = ["ip"]
  limit  = 3
  period = "1m"
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	var outcomes []rules.Outcome
	var verdicts []rules.Verdict
	for range 4 {
		d := check(e, p, req{Method: "GET", Path: "/api/x", Client: "2001:db8::1"}, s)
		verdicts = append(verdicts, d.Verdict)
		outcomes = append(outcomes, s.Matches[0].Outcome)
	}
	wantV := []rules.Verdict{rules.Forward, rules.Forward, rules.Forward, rules.RefuseLimit}
	wantO := []rules.Outcome{rules.OutcomeAllow, rules.OutcomeDryRunDeny, rules.OutcomeDryRunDeny, rules.OutcomeDryRunDeny}
	for i := range wantV {
		if verdicts[i] != wantV[i] || outcomes[i] != wantO[i] {
			t.Errorf("#%d: got %d/%v, want %d/%v", i, verdicts[i], outcomes[i], wantV[i], wantO[i])
		}
	}
	// Node-wide dry-run: nothing refuses, the refusal is still decided.
	e.SetDryRun(true)
	d := check(e, p, req{Method: "GET", Path: "/api/x", Client: "2001:db8::1"}, s)
	if d.Verdict != rules.Forward || s.Matches[1].Outcome != rules.OutcomeDryRunDeny {
		t.Errorf("node dry-run: got %d/%v", d.Verdict, s.Matches[1].Outcome)
	}
}

func TestEngineMatching(t *testing.T) {
	p := rulestest.Load(t, `
rule "login" {
  methods = ["POST"]
  paths   = ["/login"]
  hosts   = ["Example.COM"]
  key     = ["ip"]
  limit   = 1
  period  = "1m"
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(2)
	tests := []struct {
		name  string
		r     req
		match bool
	}{
		{"exact", req{Method: "POST", Path: "/login", Host: "example.com"}, true},
		{"trailing slash", req{Method: "POST", Path: "/login/", Host: "example.com"}, true},
		{"case", req{Method: "POST", Path: "/LogIn", Host: "example.com"}, true},
		{"override", req{Method: "GET", Path: "/login", Host: "example.com", Override: "POST"}, true},
		{"override with unicode space", req{Method: "GET", Path: "/login", Host: "example.com", Override: "POST\u00a0"}, true},
		{"override list", req{Method: "GET", Path: "/login", Host: "example.com", Override: "GET, post"}, true},
		{"override long s", req{Method: "GET", Path: "/login", Host: "example.com", Override: "po\u017ft"}, true},
		{"override other", req{Method: "GET", Path: "/login", Host: "example.com", Override: "PUT"}, false},
		{"other method", req{Method: "GET", Path: "/login", Host: "example.com"}, false},
		{"other host", req{Method: "POST", Path: "/login", Host: "evil.com"}, false},
		{"sub path", req{Method: "POST", Path: "/login/x", Host: "example.com"}, false},
		{"prefix sibling", req{Method: "POST", Path: "/loginx", Host: "example.com"}, false},
	}
	for _, tt := range tests {
		tt.r.Client = "192.0.2.1"
		check(e, p, tt.r, s)
		if got := len(s.Matches) == 1; got != tt.match {
			t.Errorf("%s: matched %v, want %v", tt.name, got, tt.match)
		}
	}
}

// TestEngineKeys: composite values are length-prefixed (no "ab"+"c" =
// "a"+"bc" collision), rules keep their own counters, and a /64 is one key.
func TestEngineKeys(t *testing.T) {
	p := rulestest.Load(t, `
rule "a" {
  paths = ["/x"]
  key   = ["header:A", "header:B"]
  limit = 1
  period = "1m"
}
rule "b" {
  paths = ["/y"]
  key   = ["ip"]
  limit = 1
  period = "1m"
}
rule "c" {
  paths = ["/y"]
  key   = ["ip"]
  ipv6_prefix = 128
  limit = 1
  period = "1m"
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	key := func(r req, i int) rules.Key {
		check(e, p, r, s)
		return s.Ops[i].Key
	}
	k1 := key(req{Method: "GET", Path: "/x", Client: "192.0.2.1", Fields: fields{HeaderValues: map[string]string{"A": "ab", "B": "c"}}}, 0)
	k2 := key(req{Method: "GET", Path: "/x", Client: "192.0.2.1", Fields: fields{HeaderValues: map[string]string{"A": "a", "B": "bc"}}}, 0)
	if k1 == k2 {
		t.Error(`"ab"+"c" and "a"+"bc" share a key`)
	}
	b1, c1 := key(req{Method: "GET", Path: "/y", Client: "2001:db8:1:2::1"}, 0), key(req{Method: "GET", Path: "/y", Client: "2001:db8:1:2::1"}, 1)
	if b1 == c1 {
		t.Error("two rules share a counter")
	}
	if b2 := key(req{Method: "GET", Path: "/y", Client: "2001:db8:1:2:ffff::9"}, 0); b2 != b1 {
		t.Error("one /64 gives two keys")
	}
	if c2 := key(req{Method: "GET", Path: "/y", Client: "2001:db8:1:2:ffff::9"}, 1); c2 == c1 {
		t.Error("a /128 rule merges two addresses")
	}
	if b3 := key(req{Method: "GET", Path: "/y", Client: "2001:db8:1:3::1"}, 0); b3 == b1 {
		t.Error("two /64s share a key")
	}
}

// brokenStore always fails, like an unreachable Redis.
type brokenStore struct{}

var errDown = errors.New("store down")

func (brokenStore) Take(context.Context, time.Time, []rules.Op, []rules.Result) error { return errDown }
func (brokenStore) Close() error                                                      { return nil }

func TestEngineStoreErrorFollowsEachRulesMode(t *testing.T) {
	p := rulestest.Load(t, `
rule "open" {
  paths = ["/api/*", "/login"]
  key   = ["ip"]
  limit = 1
  period = "1m"
}
rule "closed" {
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 1
  period    = "1m"
  sensitive = true
}
`)
	e := rulestest.NewEngine(t, brokenStore{})
	s := rules.NewScratch(4)
	d := check(e, p, req{Method: "GET", Path: "/api/x", Client: "192.0.2.1"}, s)
	if d.Verdict != rules.Forward || !errors.Is(d.StoreErr, errDown) || s.Matches[0].Outcome != rules.OutcomeStoreErrorAllow {
		t.Errorf("fail open: got %d %v %v", d.Verdict, d.StoreErr, s.Matches[0].Outcome)
	}
	d = check(e, p, req{Method: "POST", Path: "/login", Client: "192.0.2.1"}, s)
	if d.Verdict != rules.Unavailable || s.Matches[1].Outcome != rules.OutcomeStoreErrorDeny || s.Matches[0].Outcome != rules.OutcomeStoreErrorAllow {
		t.Errorf("fail closed: got %d %v %v", d.Verdict, s.Matches[0].Outcome, s.Matches[1].Outcome)
	}
}

func TestEngineAttemptsCountWhenRefused(t *testing.T) {
	p := rulestest.Load(t, `
rule "verify-per-ip" {
  paths     = ["/otp/verify"]
  key       = ["ip"]
  algorithm = "sliding_log"
  limit     = 3
  period    = "1m"
  count     = "attempts"
}
rule "verify-global" {
  paths     = ["/otp/verify"]
  key       = ["global"]
  algorithm = "fixed_window"
  limit     = 2
  period    = "1m"
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	// The global rule refuses the third; the attempts rule counts it anyway
	// and refuses the fourth from the same client even though it never saw
	// more than two forwarded.
	want := []rules.Outcome{rules.OutcomeAllow, rules.OutcomeAllow, rules.OutcomeAllow, rules.OutcomeDeny}
	for i, w := range want {
		check(e, p, req{Method: "POST", Path: "/otp/verify", Client: "192.0.2.1"}, s)
		if got := s.Matches[0].Outcome; got != w {
			t.Errorf("#%d: attempts rule got %v, want %v", i, got, w)
		}
	}
}

func TestEngineIdentities(t *testing.T) {
	p := rulestest.Load(t, `
identity {
  phone        = ["json:phone", "form:phone", "query:phone", "header:X-Phone"]
  phone_region = "US"
  otp_session  = ["json:challenge_id"]
}
rule "per-phone" {
  paths     = ["/otp/*"]
  key       = ["phone"]
  limit     = 2
  period    = "1h"
  sensitive = true
}
rule "foreign" {
  paths  = ["/otp/*"]
  action = "deny"
  when {
    phone_country_not_in = ["US"]
  }
}
rule "per-session" {
  paths     = ["/otp/verify"]
  key       = ["otp_session"]
  limit     = 1
  period    = "1h"
  count     = "attempts"
  reset_on_success = true
  sensitive = true
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	send := func(f fields) rules.Verdict {
		return check(e, p, req{Method: "POST", Path: "/otp/send", Client: "192.0.2.1", Fields: f}, s).Verdict
	}
	tests := []struct {
		name string
		f    fields
		want rules.Verdict
	}{
		{"json", fields{ContentType: "application/json", Text: `{"phone":"+1 202-555-0100"}`}, rules.Forward},
		{"form, same phone", fields{ContentType: "application/x-www-form-urlencoded", Text: "phone=%28202%29+555-0100"}, rules.Forward},
		{"header, same phone: third", fields{HeaderValues: map[string]string{"X-Phone": "2025550100"}}, rules.RefuseLimit},
		{"duplicate json keys", fields{ContentType: "application/json", Text: `{"phone":"+12025550111","Phone":"+12025550122"}`}, rules.RejectInvalid},
		{"duplicate query", fields{QueryValues: map[string]string{"phone": "+12025550111&phone=+12025550122"}}, rules.RejectInvalid},
		{"not a number", fields{ContentType: "application/json", Text: `{"phone":"call me maybe"}`}, rules.RejectInvalid},
		{"absent on a sensitive rule", fields{ContentType: "application/json", Text: `{}`}, rules.RejectMissing},
		{"foreign country", fields{ContentType: "application/json", Text: `{"phone":"+44 20 7946 0958"}`}, rules.RefuseLimit},
	}
	for _, tt := range tests {
		if got := send(tt.f); got != tt.want {
			t.Errorf("%s: got verdict %d, want %d", tt.name, got, tt.want)
		}
	}
	// otp_session with reset_on_success: one attempt an hour per code,
	// cleared by a success.
	verify := func() rules.Decision {
		return check(e, p, req{Method: "POST", Path: "/otp/verify", Client: "192.0.2.1", Fields: fields{ContentType: "application/json",
			Text: `{"phone":"+12025550177","challenge_id":"c1"}`}}, s)
	}
	if d := verify(); d.Verdict != rules.Forward || !d.Settle {
		t.Fatalf("first verify: verdict %d settle %v", d.Verdict, d.Settle)
	}
	if called, err := e.Settle(context.Background(), rulestest.T0, s, 200, nil); !called || err != nil {
		t.Fatalf("settle: %v %v", called, err)
	}
	if d := verify(); d.Verdict != rules.Forward {
		t.Errorf("after a success reset: verdict %d, want forward", d.Verdict)
	}
	if _, err := e.Settle(context.Background(), rulestest.T0, s, 200, []byte("failure")); err != nil {
		t.Fatal(err)
	}
	if d := verify(); d.Verdict != rules.RefuseLimit {
		t.Errorf("after a failure: verdict %d, want refused (no reset)", d.Verdict)
	}
}

// fallbackStore answers every op as a failure-handling store does when its
// backing store is down and each rule's mode refuses: StoreError, refused.
type fallbackStore struct{}

func (fallbackStore) Take(_ context.Context, _ time.Time, ops []rules.Op, res []rules.Result) error {
	for i := range ops {
		res[i] = rules.Result{StoreError: true, RetryAfter: time.Second}
	}
	return nil
}
func (fallbackStore) Close() error { return nil }

// TestEngineStoreFallbackOutcomes: a refusal by an op's on_store_error
// answer is a store_error_deny for an enforcing rule (503 when it fails
// closed) and a store_error_allow for a dry-run rule, never a dry_run_deny:
// the counts must show the store error, and say nothing of the rule.
func TestEngineStoreFallbackOutcomes(t *testing.T) {
	p := rulestest.Load(t, `
rule "shadow" {
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 1
  period    = "1m"
  sensitive = true
  dry_run   = true
}
rule "closed" {
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 1
  period    = "1m"
  sensitive = true
}
`)
	e := rulestest.NewEngine(t, fallbackStore{})
	s := rules.NewScratch(4)
	d := check(e, p, req{Method: "POST", Path: "/login", Client: "192.0.2.1"}, s)
	if !errors.Is(d.StoreErr, rules.ErrStoreFallback) || d.Verdict != rules.Unavailable {
		t.Errorf("got verdict %d, error %v; want Unavailable, ErrStoreFallback", d.Verdict, d.StoreErr)
	}
	if got := s.Matches[0].Outcome; got != rules.OutcomeStoreErrorAllow {
		t.Errorf("dry-run rule: got outcome %v, want store_error_allow", got)
	}
	if got := s.Matches[1].Outcome; got != rules.OutcomeStoreErrorDeny {
		t.Errorf("enforcing rule: got outcome %v, want store_error_deny", got)
	}
}

// TestEngineEmbeddedIPv4CountsAsTheIPv4 compiles nat64_prefixes and checks
// that the policy's Extractor hands the Engine the embedded IPv4 address
// of every embedding form, so they share the IPv4 /24's ip key with the
// native IPv4 hosts (docs/client-address.md).
func TestEngineEmbeddedIPv4CountsAsTheIPv4(t *testing.T) {
	p := rulestest.Load(t, `
edge {
  nat64_prefixes = ["2001:db8:64::/96", "2001:db8:122::/48"]
}
rule "signup" {
  paths       = ["/signup"]
  key         = ["ip"]
  ipv4_prefix = 24
  ipv6_prefix = 48
  limit       = 6
  period      = "1h"
}
`)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(2)
	for i, peer := range []string{
		"198.51.100.1",
		"2002:c633:6402::1",                    // 6to4
		"2001:0:4136:e378:8000:63bf:39cc:9bfc", // Teredo, client 198.51.100.3
		"64:ff9b::198.51.100.4",                // NAT64 well-known prefix
		"2001:db8:64::198.51.100.5",            // local /96
		"2001:db8:122:c633:64:600::",           // local /48
		"::198.51.100.7",                       // IPv4-compatible
		"2002:c633:64ff:1:2:3:4:5",             // 6to4 again: refused
	} {
		client := p.Client.Client(netip.MustParseAddr(peer), nil)
		d := check(e, p, req{Method: "POST", Path: "/signup", Client: client.String()}, s)
		want := rules.Forward
		if i >= 6 {
			want = rules.RefuseLimit
		}
		if d.Verdict != want {
			t.Errorf("signup %d from %s (counted as %v): got verdict %d, want %d", i+1, peer, client, d.Verdict, want)
		}
	}
	// Another /24, and an address whose embedded IPv4 is private (an
	// ordinary IPv6 address then), have budgets of their own.
	for _, peer := range []string{"2002:c633:6501::1", "2002:a00:1::1"} {
		client := p.Client.Client(netip.MustParseAddr(peer), nil)
		if d := check(e, p, req{Method: "POST", Path: "/signup", Client: client.String()}, s); d.Verdict != rules.Forward {
			t.Errorf("signup from %s (counted as %v): got verdict %d, want forward", peer, client, d.Verdict)
		}
	}
}

// modeStore answers every op from its on_store_error mode, as failclosed
// does while its backing store is down: FailOpen allows, the others refuse
// (a local bucket would decide; here it refuses), each marked StoreError.
type modeStore struct{}

func (modeStore) Take(_ context.Context, _ time.Time, ops []rules.Op, res []rules.Result) error {
	for i := range ops {
		res[i] = rules.Result{StoreError: true, Allowed: ops[i].OnError == rules.FailOpen}
	}
	return nil
}
func (modeStore) Close() error { return nil }

// TestEngineStoreErrorKeepsCertainRefusals: a request the Engine refuses
// whatever the counters say (an enforcing action = "deny", a missing or
// invalid identity that a rule rejects) gets the same answer when the store
// fails, with or without a failure-handling store in front (issue 9, item
// 6): the deny's 403 or bare 429, the identity's 400, never a 503 or a
// forward. Requests whose answer depends on the counters follow each rule's
// on_store_error as before.
func TestEngineStoreErrorKeepsCertainRefusals(t *testing.T) {
	p := rulestest.Load(t, `
identity {
  phone        = ["json:phone"]
  phone_region = "US"
}
rule "block-admin" {
  paths  = ["/admin/*"]
  action = "deny"
}
rule "admin-per-ip" {
  paths  = ["/admin/*"]
  key    = ["ip"]
  limit  = 100
  period = "1m"
}
rule "admin-closed" {
  paths          = ["/admin/closed"]
  key            = ["ip"]
  limit          = 100
  period         = "1m"
  on_store_error = "deny"
}
rule "otp-abroad" {
  paths     = ["/otp/send"]
  action    = "deny"
  sensitive = true
  when {
    phone_country_not_in = ["US"]
  }
}
rule "otp-per-phone" {
  paths     = ["/otp/send"]
  key       = ["phone"]
  limit     = 100
  period    = "1h"
  sensitive = true
}
rule "otp-per-ip" {
  paths          = ["/otp/send"]
  key            = ["ip"]
  limit          = 100
  period         = "1h"
  on_store_error = "allow"
}
rule "api-key" {
  paths            = ["/api/*"]
  key              = ["header:X-Api-Key"]
  missing_identity = "reject"
  limit            = 100
  period           = "1m"
}
rule "api-per-ip" {
  paths  = ["/api/*"]
  key    = ["ip"]
  limit  = 100
  period = "1m"
}
rule "login-per-account" {
  paths     = ["/login"]
  key       = ["header:X-Account"]
  limit     = 100
  period    = "1m"
  sensitive = true
}
rule "login-per-ip" {
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 100
  period    = "1m"
  sensitive = true
}
`)
	json := func(body string) fields { return fields{ContentType: "application/json", Text: body} }
	tests := []struct {
		name string
		r    req
		// want is the verdict with a failing store; certain verdicts are
		// also what a working store answers.
		want      rules.Verdict
		certain   bool
		sensitive bool
		refusing  string // the Decision's Refusing rule, "" for none
	}{
		{"deny, fail-open counter", req{Path: "/admin/x"}, rules.RefuseForbidden, true, false, "block-admin"},
		{"deny, fail-closed counter", req{Path: "/admin/closed"}, rules.RefuseForbidden, true, false, "block-admin"},
		{"sensitive deny", req{Path: "/otp/send", Fields: json(`{"phone":"+44 20 7946 0958"}`)}, rules.RefuseLimit, true, true, "otp-abroad"},
		{"missing sensitive identity", req{Path: "/otp/send", Fields: json(`{}`)}, rules.RejectMissing, true, true, ""},
		{"invalid identity", req{Path: "/otp/send", Fields: json(`{"phone":"call me maybe"}`)}, rules.RejectInvalid, true, true, ""},
		{"missing identity, reject, fail-open", req{Path: "/api/x"}, rules.RejectMissing, true, false, ""},
		{"missing identity, fail-closed counter", req{Path: "/login"}, rules.RejectMissing, true, true, ""},
		{"counted, fail-open", req{Path: "/api/x", Fields: fields{HeaderValues: map[string]string{"X-Api-Key": "k"}}}, rules.Forward, true, false, ""},
		{"counted, fail-closed", req{Path: "/otp/send", Fields: json(`{"phone":"+1 202 555 0100"}`)}, rules.Unavailable, false, true, "otp-per-phone"},
	}
	healthy := rulestest.NewEngine(t, nil)
	for _, store := range []struct {
		name  string
		store rules.Store
	}{{"store error", brokenStore{}}, {"on_store_error answers", modeStore{}}} {
		e := rulestest.NewEngine(t, store.store)
		for _, tt := range tests {
			t.Run(store.name+"/"+tt.name, func(t *testing.T) {
				tt.r.Method, tt.r.Client = "POST", "192.0.2.1"
				s := rules.NewScratch(8)
				if tt.certain {
					if d := check(healthy, p, tt.r, s); d.Verdict != tt.want {
						t.Fatalf("with a working store: got verdict %d, want %d", d.Verdict, tt.want)
					}
				}
				d := check(e, p, tt.r, s)
				if d.Verdict != tt.want || d.Sensitive != tt.sensitive {
					t.Errorf("got verdict %d sensitive %v, want %d sensitive %v", d.Verdict, d.Sensitive, tt.want, tt.sensitive)
				}
				if d.StoreErr == nil {
					t.Errorf("got no StoreErr, want the store's failure")
				}
				if tt.refusing != "" && (d.Refusing == nil || d.Refusing.Name != tt.refusing) {
					t.Errorf("got Refusing %v, want %q", d.Refusing, tt.refusing)
				}
				mint := false
				if vc := nat.ConfigOf(p); vc != nil {
					mint = vc.MayMint(s, &d)
				}
				if mint || d.Settle {
					t.Errorf("got Mint %v Settle %v on a store failure, want neither", mint, d.Settle)
				}
			})
		}
	}
	// Node-wide dry-run refuses nothing, store or no store.
	e := rulestest.NewEngine(t, brokenStore{})
	e.SetDryRun(true)
	for _, tt := range tests {
		if d := check(e, p, req{Method: "POST", Path: tt.r.Path, Client: "192.0.2.1", Fields: tt.r.Fields}, rules.NewScratch(8)); d.Verdict != rules.Forward {
			t.Errorf("dry-run %s: got verdict %d, want forward", tt.name, d.Verdict)
		}
	}
}
