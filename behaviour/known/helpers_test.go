package known_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// The minimum of rules' test helpers these tests use (rules/engine_test.go,
// values_test.go, known_helpers_test.go, callers_test.go).

// fields is a map-backed rules.Fields.
type fields struct {
	header            map[string]string
	contentType, body string
}

func (f fields) Body() ([]byte, []byte) { return []byte(f.contentType), []byte(f.body) }
func (f fields) RawQuery() []byte       { return nil }
func (f fields) Header(n []byte) []byte { return bytesOf(f.header, n) }
func (f fields) Cookie([]byte) []byte   { return nil }
func (f fields) Query([]byte) []byte    { return nil }
func (f fields) Cookies() []byte        { return nil }

func bytesOf(m map[string]string, n []byte) []byte {
	if v, ok := m[string(n)]; ok {
		return []byte(v)
	}
	return nil
}

func load(t *testing.T, src string) *rules.Policy {
	t.Helper()
	p, diags := builtin.Load("test.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

func newEngine(t *testing.T) *rules.Engine {
	t.Helper()
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	e, err := rules.NewEngine(rules.EngineOptions{Store: ms, Secret: []byte("test secret")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type req struct {
	method, path, client string
	f                    fields
}

func (r req) build() *rules.Request {
	return &rules.Request{
		Method: []byte(r.method),
		Path:   route.AppendMatchPath(nil, []byte(r.path), true),
		Client: netip.MustParseAddr(r.client),
		Fields: r.f,
	}
}

var t0 = time.Unix(1_800_000_000, 0)

// accountVisitors is a policy's account identity (a JSON body's
// username) and its visitor block.
const accountVisitors = `
identity {
  account = ["json:username"]
}
visitor {
}
`

// knownRun drives one engine and store through login attempts, settling
// each forwarded one with the origin's answer, on a scripted clock.
type knownRun struct {
	t   *testing.T
	e   *rules.Engine
	p   *rules.Policy
	vc  *nat.Config
	now time.Time
	s   *rules.Scratch
}

// login sends POST /login for username from client with visitor (""
// none), and, if forwarded, settles it with status; it returns the
// verdict.
func (k *knownRun) login(username, client, visitor string, status int) rules.Verdict {
	k.t.Helper()
	k.s.Begin(k.p)
	var id nat.ID
	copy(id[:], visitor)
	k.vc.SetVisitor(k.s, id, visitor != "")
	r := req{method: "POST", path: "/login", client: client,
		f: fields{contentType: "application/json", body: fmt.Sprintf(`{"username":%q}`, username)}}
	d := k.e.Check(context.Background(), k.now, k.p, r.build(), k.s)
	if d.Verdict == rules.Forward && d.Settle {
		if _, err := k.e.Settle(context.Background(), k.now, k.s, status, nil); err != nil {
			k.t.Fatal(err)
		}
	}
	return d.Verdict
}

// valuesRun drives one engine and store through requests with a JSON body,
// settling each forwarded one with the origin's status.
type valuesRun struct {
	t   *testing.T
	e   *rules.Engine
	p   *rules.Policy
	s   *rules.Scratch
	now time.Time
	// visitor is the valid visitor ID the requests carry ("" none), with
	// a visitor block.
	visitor string
}

func newValuesRun(t *testing.T, src string) *valuesRun {
	t.Helper()
	p := load(t, src)
	return &valuesRun{t: t, e: newEngine(t), p: p, s: rules.NewScratch(len(p.Rules)), now: t0}
}

// send decides POST path from client with body, as v.visitor, and
// settles it with status when forwarded.
func (v *valuesRun) send(path, client, body string, status int) rules.Decision {
	v.t.Helper()
	if vc := nat.ConfigOf(v.p); vc != nil {
		v.s.Begin(v.p)
		var id nat.ID
		copy(id[:], v.visitor)
		vc.SetVisitor(v.s, id, v.visitor != "")
	}
	r := req{method: "POST", path: path, client: client, f: fields{contentType: "application/json", body: body}}
	d := v.e.Check(context.Background(), v.now, v.p, r.build(), v.s)
	if d.Verdict == rules.Forward && d.Settle {
		if _, err := v.e.Settle(context.Background(), v.now, v.s, status, nil); err != nil {
			v.t.Fatal(err)
		}
	}
	return d
}

// login sends POST /login from client with body as visitor, settled with
// status, and returns the verdict.
func (v *valuesRun) login(client, body, visitor string, status int) rules.Verdict {
	v.t.Helper()
	v.visitor = visitor
	return v.send("/login", client, body, status).Verdict
}

// knownRules are a login policy's two kinds of marker that exempt, after
// its identity: a failures rule's known_visitors, and a known block a
// per-network rule's exempt_known names.
const knownRules = `
visitor {
}
known "logged-in" {
  paths = ["/login"]
  by    = ["visitor", "account"]
  for   = "30d"
}
rule "failures-account" {
  paths          = ["/login"]
  key            = ["account"]
  count          = "failures"
  limit          = 1
  period         = "15m"
  known_visitors = "30d"
  known_by       = ["visitor"]
}
rule "per-network" {
  paths        = ["/login"]
  key          = ["ip"]
  ipv4_prefix  = 24
  limit        = 3
  period       = "1h"
  exempt_known = ["logged-in"]
}`

// account is a login body for username.
func account(username string) string { return fmt.Sprintf(`{"username":%q}`, username) }
