package builtin_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// TestReviewMemoAcrossReload: one pooled Scratch serves requests under two
// policies whose memo slots differ in number and owner (policy A: the
// visitor in slot 0; policy B: the phone and the OTP session in slots 0 and
// 1, the visitor in 2), as across a reload. Nothing one request resolved is
// seen by the next: a visitor ID recorded under A does not key a request
// under B or a later request under A, and the mint op of one request is
// not the next's.
func TestReviewMemoAcrossReload(t *testing.T) {
	load := func(src string) *rules.Policy {
		p, diags := builtin.Load("review.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return p
	}
	a := load(`
visitor {}
rule "per-visitor" {
  key    = ["visitor"]
  limit  = 5
  period = "1h"
}`)
	b := load(`
identity {
  phone       = ["json:phone"]
  otp_session = ["json:session"]
}
visitor {}
rule "per-visitor" {
  key    = ["visitor"]
  limit  = 5
  period = "1h"
}
rule "per-session" {
  key    = ["otp_session"]
  limit  = 5
  period = "1h"
}`)
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := rules.NewEngine(rules.EngineOptions{Store: st, Secret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	s := rules.NewScratch(1)
	now := time.Unix(1e9, 0)
	check := func(p *rules.Policy, body string, visitor string) (rules.Key, int, bool) {
		t.Helper()
		req := rules.Request{Method: []byte("POST"), Host: []byte("example.com"), Path: []byte("/"), Client: netip.MustParseAddr("192.0.2.1"),
			Fields: &keyFields{headers: map[string]string{}, ct: "application/json", body: body}}
		s.Begin(p)
		if visitor != "" {
			nat.ConfigOf(p).SetVisitor(s, visitorID(visitor), true)
		}
		e.Check(context.Background(), now, p, &req, s)
		_, ok := nat.ConfigOf(p).Visitor(s)
		return s.Ops[s.Matches[0].Op].Key, nat.ConfigOf(p).MintOp(s), ok
	}
	cookieA, _, _ := check(a, "", "")
	cookieB, _, _ := check(b, "", "")
	withA, mint, ok := check(a, "", "alice")
	if withA == cookieA || mint >= 0 || !ok {
		t.Fatalf("under A, alice: key %x (cookieless %x), mint op %d, visitor %v", withA, cookieA, mint, ok)
	}
	if k, mint, ok := check(b, `{"phone":"+14155550100","session":"s1"}`, ""); k != cookieB || mint < 0 || ok {
		t.Errorf("under B after alice under A: key %x, want the cookieless %x; mint op %d; visitor %v", k, cookieB, mint, ok)
	}
	if k, mint, ok := check(a, "", ""); k != cookieA || mint < 0 || ok {
		t.Errorf("under A again, no cookie: key %x, want the cookieless %x; mint op %d; visitor %v", k, cookieA, mint, ok)
	}
	// Check without Begin (a caller that records nothing before Check).
	req := rules.Request{Method: []byte("POST"), Host: []byte("example.com"), Path: []byte("/"), Client: netip.MustParseAddr("192.0.2.1"),
		Fields: &keyFields{headers: map[string]string{}, ct: "application/json", body: `{"phone":"+14155550100"}`}}
	s.Begin(b)
	nat.ConfigOf(b).SetVisitor(s, visitorID("bob"), true)
	e.Check(context.Background(), now, b, &req, s)
	e.Check(context.Background(), now, b, &req, s) // no Begin: bob must not count
	if _, ok := nat.ConfigOf(b).Visitor(s); ok {
		t.Errorf("a Check without Begin saw the previous request's visitor")
	}
	if k := s.Ops[s.Matches[0].Op].Key; k != cookieB {
		t.Errorf("a Check without Begin keyed on the previous request's visitor: %x, want %x", k, cookieB)
	}
}

// reviewDownStore is a store that cannot decide: every Take fails, after
// writing allowing results (as a store that failed part-way might), so a
// reader of Res without the error would see a mint allowed.
type reviewDownStore struct{}

var errReviewDown = errors.New("review: store down")

func (reviewDownStore) Take(_ context.Context, _ time.Time, ops []rules.Op, res []rules.Result) error {
	for i := range res {
		res[i] = rules.Result{Allowed: true}
	}
	return errReviewDown
}
func (reviewDownStore) Close() error { return nil }

// TestReviewNoMintWhenStoreDown: a request forwarded because its rules fail
// open when the store is down gets no visitor ID: the store decided
// nothing, the mint budget included (nat.Config.MayMint), as before issue 10.
func TestReviewNoMintWhenStoreDown(t *testing.T) {
	p, diags := builtin.Load("review.hcl", []byte(`
visitor {}
rule "per-visitor" {
  key            = ["visitor"]
  limit          = 5
  period         = "1h"
  on_store_error = "allow"
}`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	e, err := rules.NewEngine(rules.EngineOptions{Store: reviewDownStore{}, Secret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	s := rules.NewScratch(1)
	req := rules.Request{Method: []byte("GET"), Host: []byte("example.com"), Path: []byte("/"), Client: netip.MustParseAddr("192.0.2.1"),
		Fields: &keyFields{headers: map[string]string{}}}
	s.Begin(p)
	d := e.Check(context.Background(), time.Unix(1e9, 0), p, &req, s)
	vc := nat.ConfigOf(p)
	if d.Verdict != rules.Forward || vc.MintOp(s) < 0 {
		t.Fatalf("verdict %d, mint op %d: want a forwarded request with a mint op", d.Verdict, vc.MintOp(s))
	}
	if vc.MayMint(s, &d) {
		t.Errorf("MayMint after the store failed (%v)", d.StoreErr)
	}
}
