package values_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// valuesRun drives one engine and store through requests with a JSON body
// (rulestest.Run), as visitor: the valid visitor ID the requests carry
// ("" none), with a visitor block.
type valuesRun struct {
	*rulestest.Run
	visitor string
}

func newValuesRun(t *testing.T, src string) *valuesRun {
	t.Helper()
	return &valuesRun{Run: rulestest.NewRun(t, src)}
}

// send decides POST path from client with body (and headers, name then
// value), as v.visitor, and settles it with status when forwarded.
func (v *valuesRun) send(path, client, body string, status int, header ...string) rules.Decision {
	v.T.Helper()
	f := rulestest.Fields{ContentType: "application/json", Text: body, HeaderValues: map[string]string{}}
	for i := 0; i+1 < len(header); i += 2 {
		f.HeaderValues[header[i]] = header[i+1]
	}
	return v.Send(rulestest.Req{Method: "POST", Path: path, Client: client, Fields: f}, v.visitor, status)
}

// login sends POST /login from client with body as visitor, settled with
// status, and returns the verdict.
func (v *valuesRun) login(client, body, visitor string, status int) rules.Verdict {
	v.T.Helper()
	v.visitor = visitor
	return v.send("/login", client, body, status).Verdict
}

// matchesOf returns the request's matches of rule name.
func (v *valuesRun) matchesOf(name string) []rules.Match {
	var out []rules.Match
	for _, m := range v.S.Matches {
		if m.Rule.Name == name {
			out = append(out, m)
		}
	}
	return out
}

func login(username, email string) string {
	return fmt.Sprintf(`{"username":%q,"email":%q}`, username, email)
}

const twoSourceIdentity = `
identity {
  account = ["json:username", "json:email"]
}
`

// TestEveryValueIsCounted: a rule keyed on an identity whose sources
// disagree has a match, a key and an op for each value, and refuses when
// any value is over its limit; a refused request charges no value; equal
// normalised values are one.
func TestEveryValueIsCounted(t *testing.T) {
	v := newValuesRun(t, twoSourceIdentity+`
rule "per-account" {
  paths  = ["/login"]
  key    = ["account"]
  limit  = 2
  period = "1h"
}`)
	if d := v.send("/login", "192.0.2.1", login("a", "x@example.com"), 200); d.Verdict != rules.Forward {
		t.Fatalf("first: %v", d.Verdict)
	}
	ms := v.matchesOf("per-account")
	if len(ms) != 2 || ms[0].Value != 0 || ms[1].Value != 1 || v.S.Ops[ms[0].Op].Key == v.S.Ops[ms[1].Op].Key {
		t.Fatalf("matches %+v: want two values with keys of their own", ms)
	}
	if d := v.send("/login", "192.0.2.1", login("b", "X@Example.com"), 200); d.Verdict != rules.Forward {
		t.Fatalf("second: %v", d.Verdict)
	}
	// x@example.com is spent: the request is refused, whatever username.
	d := v.send("/login", "192.0.2.1", login("c", "x@example.com"), 200)
	if d.Verdict != rules.RefuseLimit || d.Refusing == nil || d.Refusing.Name != "per-account" {
		t.Fatalf("third, x spent: %v", d.Verdict)
	}
	if w := rules.Worst(v.S.Matches, 0); v.S.Matches[w].Outcome != rules.OutcomeDeny || v.S.Matches[w].Value != 1 {
		t.Errorf("Worst: match %d %+v, want x's deny", w, v.S.Matches[w])
	}
	// c was not charged by the refused request: two more fit.
	for i := range 2 {
		if d := v.send("/login", "192.0.2.1", `{"username":"c"}`, 200); d.Verdict != rules.Forward {
			t.Errorf("c alone, %d: %v, want forwarded (the refusal charged it nothing)", i+1, d.Verdict)
		}
	}
	// One account written twice is one value.
	v.send("/login", "192.0.2.1", login("Dora@Example.com", " dora@example.com"), 200)
	if ms := v.matchesOf("per-account"); len(ms) != 1 {
		t.Errorf("one account in both sources: %d matches, want 1", len(ms))
	}
}

// TestDistinctCountsEveryValue: count_distinct over an identity whose
// sources disagree counts each value as a member, and a request's values
// never fill a set past its limit, on a new key and an existing one alike:
// two new values need two places.
func TestDistinctCountsEveryValue(t *testing.T) {
	v := newValuesRun(t, twoSourceIdentity+`
rule "accounts-per-ip" {
  paths          = ["/login"]
  key            = ["ip"]
  count_distinct = "account"
  limit          = 3
  period         = "1h"
}`)
	const ip = "192.0.2.2"
	steps := []struct {
		body string
		want rules.Verdict
	}{
		{login("a", "b"), rules.Forward},        // a new key: both counted (2 of 3)
		{login("c", "d"), rules.RefuseLimit},    // two new values, one place
		{`{"username":"c"}`, rules.Forward},     // the refusal counted neither: c fits (3 of 3)
		{login("a", "c"), rules.Forward},        // known values need no place
		{`{"username":"d"}`, rules.RefuseLimit}, // full
		{`{"email":"b"}`, rules.Forward},
	}
	for i, st := range steps {
		if d := v.send("/login", ip, st.body, 200); d.Verdict != st.want {
			t.Errorf("step %d %s: %v, want %v", i, st.body, d.Verdict, st.want)
		}
	}
}

// TestFailuresAndResetPerValue: count = "failures" charges every value
// before the origin answers and gives each back on a success; a success
// of a request whose values disagree clears no value's counter under
// reset_on_success (the origin logged in one of them, which the edge
// cannot tell: an attacker's own username beside a victim's email must
// not wipe the victim's failures), while a success naming one value
// clears it.
func TestFailuresAndResetPerValue(t *testing.T) {
	v := newValuesRun(t, twoSourceIdentity+`
rule "failures" {
  paths            = ["/login"]
  key              = ["account"]
  count            = "failures"
  reset_on_success = true
  limit            = 2
  period           = "1h"
}`)
	v.send("/login", "192.0.2.3", login("a", "x"), 401)
	v.send("/login", "192.0.2.3", login("b", "x"), 401) // x: two failures
	if d := v.send("/login", "192.0.2.3", `{"email":"x"}`, 401); d.Verdict != rules.RefuseLimit {
		t.Fatalf("x after two failures: %v, want refused", d.Verdict)
	}
	// A success naming a and y gives back both charges and clears
	// neither: a keeps its failure, y has none.
	v.send("/login", "192.0.2.3", login("a", "y"), 200)
	for _, step := range []struct {
		body string
		want rules.Verdict
	}{
		{`{"username":"a"}`, rules.Forward},     // a's second failure
		{`{"username":"a"}`, rules.RefuseLimit}, // not cleared by the two-value success
		{`{"email":"y"}`, rules.Forward},
		{`{"email":"y"}`, rules.Forward},
		{`{"email":"y"}`, rules.RefuseLimit}, // the success's charge was given back, no more
	} {
		if d := v.send("/login", "192.0.2.3", step.body, 401); d.Verdict != step.want {
			t.Errorf("%s after the two-value success: %v, want %v", step.body, d.Verdict, step.want)
		}
	}
	// A success naming b alone clears b's failure (from the second
	// request above).
	if d := v.send("/login", "192.0.2.3", `{"username":"b"}`, 200); d.Verdict != rules.Forward {
		t.Fatalf("b's own login: %v, want forwarded", d.Verdict)
	}
	for i, want := range []rules.Verdict{rules.Forward, rules.Forward, rules.RefuseLimit} {
		if d := v.send("/login", "192.0.2.3", `{"username":"b"}`, 401); d.Verdict != want {
			t.Errorf("b's failure %d after its own success: %v, want %v (cleared)", i+1, d.Verdict, want)
		}
	}
}

// TestKnownVisitorPerValue: known_visitors recognises a visitor for the
// account it logged in as, named exactly, and only on a request naming
// that account alone: a request whose sources disagree names no one
// caller, so even the known browser is held to every value's counter
// there, its own account's included (the edge cannot tell which one the
// origin acts on, and an attacker's known browser naming its own account
// beside a victim's must gain nothing).
func TestKnownVisitorPerValue(t *testing.T) {
	v := newValuesRun(t, twoSourceIdentity+`
visitor {
}
rule "failures-account" {
  paths          = ["/login"]
  key            = ["account"]
  count          = "failures"
  limit          = 2
  period         = "15m"
  known_visitors = "30d"
  known_by       = ["visitor"]
}`)
	send := func(body, visitor string, status int) rules.Verdict {
		t.Helper()
		return v.login("192.0.2.4", body, visitor, status)
	}
	send(`{"username":"alice"}`, "browser", 200) // the browser is known for alice
	for range 2 {
		send(`{"username":"alice"}`, "attacker", 401) // alice locked for everyone else
		send(`{"email":"victim"}`, "attacker", 401)   // and victim
	}
	if got := send(`{"username":"alice"}`, "attacker", 401); got != rules.RefuseLimit {
		t.Fatalf("alice for the attacker: %v, want refused", got)
	}
	if got := send(`{"username":"alice"}`, "browser", 401); got != rules.Forward {
		t.Errorf("the known browser naming alice: %v, want forwarded (known)", got)
	}
	if got := send(login("alice", "fresh"), "browser", 401); got != rules.RefuseLimit {
		t.Errorf("the known browser naming alice and a fresh value: %v, want refused (no one caller: alice's counter holds it)", got)
	}
	if got := send(login("alice", "victim"), "browser", 401); got != rules.RefuseLimit {
		t.Errorf("the known browser naming alice beside a locked account it is not known for: %v, want refused", got)
	}
}

// TestBanPerValue: a ban trips on the value that was refused; the other
// value of the request is not banned.
func TestBanPerValue(t *testing.T) {
	v := newValuesRun(t, twoSourceIdentity+`
rule "per-account" {
  paths  = ["/login"]
  key    = ["account"]
  limit  = 1
  period = "1m"
  ban    = "1h"
}`)
	v.send("/login", "192.0.2.5", `{"email":"x"}`, 200)
	if d := v.send("/login", "192.0.2.5", login("a", "x"), 200); d.Verdict != rules.RefuseLimit {
		t.Fatalf("a beside spent x: %v, want refused", d.Verdict)
	}
	v.Now = v.Now.Add(2 * time.Minute) // x's counter has room again; its ban has not ended
	if d := v.send("/login", "192.0.2.5", `{"username":"a"}`, 200); d.Verdict != rules.Forward {
		t.Errorf("a alone: %v, want forwarded (not banned)", d.Verdict)
	}
	if d := v.send("/login", "192.0.2.5", `{"email":"x"}`, 200); d.Verdict != rules.RefuseLimit {
		t.Errorf("x after its ban began: %v, want refused", d.Verdict)
	}
}

// TestCeilingPerValue: a visitor rule keyed on an identity with two values
// holds each value to its own IP ceiling.
func TestCeilingPerValue(t *testing.T) {
	v := newValuesRun(t, twoSourceIdentity+`
visitor {
}
rule "per-visitor-account" {
  paths      = ["/login"]
  key        = ["visitor", "account"]
  limit      = 1
  period     = "1h"
  ip_ceiling = 2
}`)
	send := func(body, visitor string) rules.Verdict {
		t.Helper()
		return v.login("192.0.2.6", body, visitor, 200)
	}
	if got := send(login("a", "x"), "v1"); got != rules.Forward {
		t.Fatalf("v1: %v", got)
	}
	n := 0
	for _, m := range v.S.Matches {
		if m.CeilingOp >= 0 {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d of the rule's matches have a ceiling op, want both values'", n)
	}
	send(`{"email":"x"}`, "v2") // x's ceiling: 2 of 2
	if got := send(login("b", "x"), "v3"); got != rules.RefuseLimit {
		t.Errorf("a third visitor naming x: %v, want refused by x's IP ceiling", got)
	}
	if got := send(`{"username":"b"}`, "v3"); got != rules.Forward {
		t.Errorf("b alone: %v, want forwarded (the refusal charged it nothing)", got)
	}
}

const twoPhoneIdentity = `
identity {
  phone        = ["json:phone", "header:X-Phone"]
  phone_region = "US"
}
`

// TestPhoneValues: a request naming two phones counts each on a phone
// rule and each distinct block on a phone_range rule (two numbers of one
// block are one value); a phone condition holds for a rule that limits or
// denies when it holds for some phone, and exempts only when it holds for
// every one.
func TestPhoneValues(t *testing.T) {
	v := newValuesRun(t, twoPhoneIdentity+`
rule "trusted-us" {
  paths  = ["/otp/send"]
  action = "skip"
  skip   = ["per-phone"]
  when {
    phone_country_in = ["US"]
  }
}
rule "countries" {
  paths  = ["/otp/send"]
  action = "deny"
  when {
    phone_country_not_in = ["US", "GB"]
  }
}
rule "per-phone" {
  paths  = ["/otp/send"]
  key    = ["phone"]
  limit  = 5
  period = "1h"
}
rule "per-range" {
  paths  = ["/otp/send"]
  key    = ["phone_range"]
  limit  = 5
  period = "1h"
}`)
	// Two US numbers of one block: exempt from per-phone (every phone is
	// US), one value for per-range.
	v.send("/otp/send", "192.0.2.7", `{"phone":"+12025550100"}`, 200, "X-Phone", "+12025550101")
	if ms := v.matchesOf("per-phone"); len(ms) != 1 || ms[0].Outcome != rules.OutcomeExempt {
		t.Errorf("per-phone for two US phones: %+v, want exempt", ms)
	}
	if ms := v.matchesOf("per-range"); len(ms) != 1 {
		t.Errorf("per-range for two phones of one block: %d matches, want 1", len(ms))
	}
	// A US and a GB number: not exempt (one is not US), both counted.
	d := v.send("/otp/send", "192.0.2.7", `{"phone":"+12025550100"}`, 200, "X-Phone", "+447400123456")
	if ms := v.matchesOf("per-phone"); d.Verdict != rules.Forward || len(ms) != 2 || ms[0].Outcome != rules.OutcomeAllow {
		t.Errorf("per-phone for a US and a GB phone: %v %+v, want both counted", d.Verdict, ms)
	}
	// A US and a French number: the deny rule applies (one is not served).
	if d := v.send("/otp/send", "192.0.2.7", `{"phone":"+12025550100"}`, 200, "X-Phone", "+33612345678"); d.Verdict != rules.RefuseForbidden {
		t.Errorf("a US and a French phone: %v, want the deny rule's 403", d.Verdict)
	}
}

// TestOnConflictReject: on_conflict = "reject" makes an identity whose
// sources disagree invalid (400 by invalid_identity); the same value in
// both is no conflict; an identity the object does not name counts every
// value.
func TestOnConflictReject(t *testing.T) {
	v := newValuesRun(t, `
identity {
  account     = ["json:username", "json:email"]
  phone       = ["json:phone", "header:X-Phone"]
  on_conflict = { phone = "reject" }
}
rule "per-account" {
  paths  = ["/login"]
  key    = ["account"]
  limit  = 5
  period = "1h"
}
rule "per-phone" {
  paths  = ["/otp/send"]
  key    = ["phone"]
  limit  = 5
  period = "1h"
}`)
	if d := v.send("/otp/send", "192.0.2.8", `{"phone":"+12025550100"}`, 200, "X-Phone", "+447400123456"); d.Verdict != rules.RejectInvalid {
		t.Errorf("two phones under reject: %v, want 400", d.Verdict)
	}
	if d := v.send("/otp/send", "192.0.2.8", `{"phone":"+1 202 555 0100"}`, 200, "X-Phone", "(202) 555-0100"); d.Verdict != rules.Forward {
		t.Errorf("one phone written twice: %v, want forwarded", d.Verdict)
	}
	if d := v.send("/login", "192.0.2.8", login("a", "b"), 200); d.Verdict != rules.Forward || len(v.matchesOf("per-account")) != 2 {
		t.Errorf("two accounts under count: %v, want both counted", d.Verdict)
	}
	all := newValuesRun(t, `
identity {
  account     = ["json:username", "json:email"]
  on_conflict = "reject"
}
rule "per-account" {
  paths  = ["/login"]
  key    = ["account"]
  limit  = 5
  period = "1h"
}`)
	if d := all.send("/login", "192.0.2.8", login("a", "b"), 200); d.Verdict != rules.RejectInvalid {
		t.Errorf("two accounts under on_conflict = \"reject\": %v, want 400", d.Verdict)
	}
}

// TestOTPSessionIsTheChallengeAlone: otp_session counts the challenge ID
// whatever phone is written beside it, and needs no phone source.
func TestOTPSessionIsTheChallengeAlone(t *testing.T) {
	v := newValuesRun(t, `
identity {
  otp_session = ["json:challenge_id"]
}
rule "per-session" {
  paths  = ["/otp/verify"]
  key    = ["otp_session"]
  limit  = 2
  period = "15m"
  count  = "attempts"
}`)
	for i, want := range []rules.Verdict{rules.Forward, rules.Forward, rules.RefuseLimit} {
		body := fmt.Sprintf(`{"phone":"+1202555%04d","challenge_id":"c1"}`, 100+i)
		if d := v.send("/otp/verify", "192.0.2.9", body, 401); d.Verdict != want {
			t.Errorf("guess %d at c1 with a new phone: %v, want %v", i+1, d.Verdict, want)
		}
	}
	if d := v.send("/otp/verify", "192.0.2.9", `{"challenge_id":"c2"}`, 401); d.Verdict != rules.Forward {
		t.Errorf("another challenge: %v, want forwarded", d.Verdict)
	}
}

// TestSensitiveBanPerValue: a ban of ban_scope = "sensitive" on a rule
// keyed on an identity with two values refuses, on every sensitive route,
// a request naming the banned value in either source, and not one naming
// only the other.
func TestSensitiveBanPerValue(t *testing.T) {
	v := newValuesRun(t, twoSourceIdentity+`
rule "per-account" {
  paths     = ["/login"]
  key       = ["account"]
  limit     = 1
  period    = "1m"
  sensitive = true
  ban       = "1h"
  ban_scope = "sensitive"
}
rule "signup-per-ip" {
  paths     = ["/signup"]
  key       = ["ip"]
  limit     = 100
  period    = "1h"
  sensitive = true
}`)
	v.send("/login", "192.0.2.10", `{"email":"x"}`, 200)
	if d := v.send("/login", "192.0.2.10", `{"email":"x"}`, 200); d.Verdict != rules.RefuseLimit {
		t.Fatalf("x's second login: %v, want refused (and banned)", d.Verdict)
	}
	if d := v.send("/signup", "192.0.2.11", login("a", "x"), 200); d.Verdict != rules.RefuseLimit || d.Refusing.Name != "per-account" {
		t.Errorf("a signup naming x as its second value: %v, want per-account's ban", d.Verdict)
	}
	if d := v.send("/signup", "192.0.2.11", login("x", "a"), 200); d.Verdict != rules.RefuseLimit {
		t.Errorf("a signup naming x as its first value: %v, want per-account's ban", d.Verdict)
	}
	if d := v.send("/signup", "192.0.2.11", login("a", "b"), 200); d.Verdict != rules.Forward {
		t.Errorf("a signup naming neither: %v, want forwarded", d.Verdict)
	}
}

// TestSeveralValuesMakeNoOneKnown: a success of a login whose sources
// disagree (its own username beside a victim's email) makes its visitor
// known for neither account, by known_visitors or by a known block: the
// origin acted on one of them, which the edge cannot tell. And a known
// block recognises no caller whose sources disagree, so a browser known
// for its own account gains nothing on a request naming a victim beside
// it. A success naming one account still makes the browser known.
func TestSeveralValuesMakeNoOneKnown(t *testing.T) {
	v := newValuesRun(t, twoSourceIdentity+rulestest.KnownRules)
	// The attacker logs in with its own username and the victim's email:
	// a success, which must record no marker for the victim.
	if got := v.login("192.0.2.9", login("mallory", "victim"), "attacker", 200); got != rules.Forward {
		t.Fatalf("the attacker's own login: %v, want forwarded", got)
	}
	// Someone else fails on the victim: its one failure locks the victim
	// for everyone but a visitor known for it.
	v.login("198.51.100.1", `{"email":"victim"}`, "other", 401)
	if got := v.login("192.0.2.9", `{"email":"victim"}`, "attacker", 401); got != rules.RefuseLimit {
		t.Errorf("the attacker at the victim after a two-value success: %v, want refused (known for no value)", got)
	}
	// A single-value success does make the browser known (the control).
	v.login("203.0.113.1", `{"username":"alice"}`, "browser", 200)
	v.login("198.51.100.2", `{"username":"alice"}`, "other", 401)
	if got := v.login("203.0.113.1", `{"username":"alice"}`, "browser", 401); got != rules.Forward {
		t.Errorf("the known browser at its own locked account: %v, want forwarded", got)
	}
	// per-network: 3 an hour per /24. Spend 203.0.113.0/24's hour: the
	// browser's first login above was charged (it was not known yet), its
	// second was not (known); two more by strangers fill it.
	v.login("203.0.113.7", `{"username":"zed"}`, "stranger", 200)
	if got := v.login("203.0.113.8", `{"username":"yan"}`, "stranger2", 200); got != rules.Forward {
		t.Fatalf("the network's third login: %v, want forwarded", got)
	}
	if got := v.login("203.0.113.9", `{"username":"xi"}`, "stranger3", 200); got != rules.RefuseLimit {
		t.Fatalf("the network's fourth login: %v, want refused (per-network)", got)
	}
	if got := v.login("203.0.113.1", `{"username":"alice"}`, "browser", 200); got != rules.Forward {
		t.Errorf("the known browser through its full network: %v, want forwarded (exempt_known)", got)
	}
	if got := v.login("203.0.113.1", login("alice", "victim2"), "browser", 200); got != rules.RefuseLimit {
		t.Errorf("the known browser naming a victim beside its own account, through its full network: %v, want refused (sources that disagree name no known caller)", got)
	}
}
