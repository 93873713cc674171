// Package rulestest is what the tests of rule behaviours share (behaviour/*
// and rules' own external tests): a policy loaded with every feature of the
// build, an Engine on a memory store, a store that records its calls,
// requests built as the gateway builds them, map-backed request fields,
// and a Run that drives logins through an Engine on a scripted clock and
// settles them. A package's test helpers cannot be imported, so without it
// each behaviour's tests copied rules'. Nothing outside tests imports it.
package rulestest

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// T0 is the instant the tests' scripted clocks start at.
var T0 = time.Unix(1_800_000_000, 0)

// Time returns the instant s names in RFC 3339 (fractions of a second
// allowed), for a test's scripted clock; an s that does not parse fails
// t.
func Time(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Secret is the key secret of NewEngine's engines.
const Secret = "test secret"

// LoadDiags loads src as the policy file test.hcl with every feature of
// the build (builtin.Load).
func LoadDiags(src string) (*rules.Policy, hcl.Diagnostics) {
	return builtin.Load("test.hcl", []byte(src))
}

// Load is LoadDiags for a policy that must load: an error fails t.
func Load(t testing.TB, src string) *rules.Policy {
	t.Helper()
	p, diags := LoadDiags(src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// WantError checks the diagnostics of a policy's load against want, text
// its errors must hold ("": no error at all), failing t with what, the
// policy's name in the message; it reports whether the policy loaded as
// wanted without an error, for the test to look at it further.
func WantError(t testing.TB, what string, diags hcl.Diagnostics, want string) bool {
	t.Helper()
	switch {
	case want == "" && diags.HasErrors():
		t.Errorf("%s: %v", what, diags.Error())
	case want != "" && !strings.Contains(diags.Error(), want):
		t.Errorf("%s: got %q, want an error %q", what, diags.Error(), want)
	}
	return want == "" && !diags.HasErrors()
}

// NewStore returns a memory store, closed when t ends.
func NewStore(t testing.TB) rules.Store {
	t.Helper()
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return ms
}

// Recorder wraps a Store and keeps a copy of each Take call's ops, so a
// test can say how many store calls a request made and what they held.
// It is safe for concurrent use.
type Recorder struct {
	rules.Store
	mu    sync.Mutex
	calls [][]rules.Op
}

// Take records a copy of ops and passes the call on.
func (r *Recorder) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	r.mu.Lock()
	r.calls = append(r.calls, append([]rules.Op(nil), ops...))
	r.mu.Unlock()
	return r.Store.Take(ctx, now, ops, res)
}

// N returns how many calls were made.
func (r *Recorder) N() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// Since returns the calls after the first n.
func (r *Recorder) Since(n int) [][]rules.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]rules.Op(nil), r.calls[n:]...)
}

// Last returns the last call's ops, nil before any call.
func (r *Recorder) Last() []rules.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return nil
	}
	return r.calls[len(r.calls)-1]
}

// NewEngine returns an engine on store (a NewStore when nil), keyed by
// Secret.
func NewEngine(t testing.TB, store rules.Store) *rules.Engine {
	t.Helper()
	if store == nil {
		store = NewStore(t)
	}
	e, err := rules.NewEngine(rules.EngineOptions{Store: store, Secret: []byte(Secret)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Fields is a map-backed rules.Fields: a body of ContentType and Text, and
// headers, cookies and query parameters by name (nil maps: none), the
// query string and the Cookie header joined from them in name order.
type Fields struct {
	ContentType, Text string
	HeaderValues      map[string]string
	CookieValues      map[string]string
	QueryValues       map[string]string
}

// Body returns the body's content type and bytes.
func (f Fields) Body() ([]byte, []byte) { return []byte(f.ContentType), []byte(f.Text) }

// Header returns header n's value, nil when absent.
func (f Fields) Header(n []byte) []byte { return lookup(f.HeaderValues, n) }

// Cookie returns cookie n's value, nil when absent.
func (f Fields) Cookie(n []byte) []byte { return lookup(f.CookieValues, n) }

// Query returns query parameter n's value, nil when absent.
func (f Fields) Query(n []byte) []byte { return lookup(f.QueryValues, n) }

// RawQuery joins the query parameters as a query string, in name order
// (nil: none).
func (f Fields) RawQuery() []byte { return join(f.QueryValues, "&") }

// Cookies joins the cookies as a Cookie header, in name order (nil: none).
func (f Fields) Cookies() []byte { return join(f.CookieValues, "; ") }

// join returns m's name=value pairs in name order, separated by sep; nil
// for an empty m.
func join(m map[string]string, sep string) []byte {
	if len(m) == 0 {
		return nil
	}
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, k+"="+m[k])
	}
	return []byte(strings.Join(pairs, sep))
}

func lookup(m map[string]string, n []byte) []byte {
	if v, ok := m[string(n)]; ok {
		return []byte(v)
	}
	return nil
}

// RawHeaders is a rules.Fields of headers alone, by name, that answers
// without converting, as the gateway's fasthttp view does: for the tests
// that count allocations, which Fields' conversions would spoil.
type RawHeaders map[string][]byte

// Header returns header n's value, nil when absent.
func (h RawHeaders) Header(n []byte) []byte { return h[string(n)] }

// Cookie returns nil: headers only.
func (RawHeaders) Cookie([]byte) []byte { return nil }

// Query returns nil: headers only.
func (RawHeaders) Query([]byte) []byte { return nil }

// RawQuery returns nil: headers only.
func (RawHeaders) RawQuery() []byte { return nil }

// Body returns no body: headers only.
func (RawHeaders) Body() ([]byte, []byte) { return nil, nil }

// Cookies returns nil: headers only.
func (RawHeaders) Cookies() []byte { return nil }

var (
	_ rules.Fields = Fields{}
	_ rules.Fields = RawHeaders(nil)
)

// JSON returns Fields with a JSON body.
func JSON(body string) Fields { return Fields{ContentType: "application/json", Text: body} }

// AccountBody is a login's JSON body naming username.
func AccountBody(username string) string { return fmt.Sprintf(`{"username":%q}`, username) }

// Account returns Fields with a JSON body naming username (AccountBody).
func Account(username string) Fields { return JSON(AccountBody(username)) }

// Req is a request as the tests write it: Client a literal address, Path
// the path the origin receives (Build folds it into the match path as the
// gateway does), Host empty for none, Override the method override
// header's value ("" none), Fields nil for none.
type Req struct {
	Method, Path, Host, Client string
	Override                   string
	Fields                     rules.Fields
}

// Build returns r as a rules.Request.
func (r Req) Build() *rules.Request {
	q := &rules.Request{
		Method: []byte(r.Method),
		Path:   route.AppendMatchPath(nil, []byte(r.Path), true),
		Client: netip.MustParseAddr(r.Client),
		Fields: r.Fields,
	}
	if r.Host != "" {
		q.Host = []byte(r.Host)
	}
	if r.Override != "" {
		q.Overrides = route.AppendMethodTokens(nil, []byte(r.Override))
	}
	return q
}

// AccountVisitors is a policy's account identity (a JSON body's
// username: Account) and its visitor block, for the tests of logins by
// visitors.
const AccountVisitors = `
identity {
  account = ["json:username"]
}
visitor {
}
`

// KnownRules are a login policy's two kinds of marker that exempt, for
// the tests of known callers (behaviour/known's and behaviour/values'),
// after the policy's identity: a failures rule's known_visitors, and a
// known block a per-network rule's exempt_known names.
const KnownRules = `
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

// Run drives one engine and store through requests on a scripted clock
// (Now), settling each forwarded one with the origin's status.
type Run struct {
	T   testing.TB
	E   *rules.Engine
	P   *rules.Policy
	S   *rules.Scratch
	Now time.Time
}

// NewRun returns a Run of the policy src on an engine of its own, at T0.
func NewRun(t testing.TB, src string) *Run {
	t.Helper()
	p := Load(t, src)
	return &Run{T: t, E: NewEngine(t, nil), P: p, S: rules.NewScratch(len(p.Rules)), Now: T0}
}

// Check decides r at Now, settling nothing.
func (k *Run) Check(r Req) rules.Decision {
	return k.E.Check(context.Background(), k.Now, k.P, r.Build(), k.S)
}

// WantVerdicts decides r at Now once for each of want, settling nothing,
// and fails k.T unless the i-th decision's verdict is want[i] (what names
// the requests in the message).
func (k *Run) WantVerdicts(what string, r Req, want ...rules.Verdict) {
	k.T.Helper()
	for i, w := range want {
		if d := k.Check(r); d.Verdict != w {
			k.T.Fatalf("%s %d: got verdict %v, want %v", what, i+1, d.Verdict, w)
		}
	}
}

// Get decides a GET of path with fields f (nil: none) from one client,
// 192.0.2.9, at Now, settling nothing.
func (k *Run) Get(path string, f rules.Fields) rules.Decision {
	return k.Check(Req{Method: "GET", Path: path, Client: "192.0.2.9", Fields: f})
}

// Send decides r as visitor (a valid visitor ID, "" none; the policy's
// visitor block must exist for one) and, when it is forwarded and asks to
// be settled, settles it with status; it returns the decision.
func (k *Run) Send(r Req, visitor string, status int) rules.Decision {
	k.T.Helper()
	if vc := nat.ConfigOf(k.P); vc != nil {
		k.S.Begin(k.P)
		var id nat.ID
		copy(id[:], visitor)
		vc.SetVisitor(k.S, id, visitor != "")
	}
	d := k.E.Check(context.Background(), k.Now, k.P, r.Build(), k.S)
	if d.Verdict == rules.Forward && d.Settle {
		if _, err := k.E.Settle(context.Background(), k.Now, k.S, status, nil); err != nil {
			k.T.Fatal(err)
		}
	}
	return d
}

// Do sends method path with a JSON body naming username from client as
// visitor, settled with status, and returns the verdict.
func (k *Run) Do(method, path, username, client, visitor string, status int) rules.Verdict {
	k.T.Helper()
	return k.Send(Req{Method: method, Path: path, Client: client, Fields: Account(username)}, visitor, status).Verdict
}

// Login is Do of POST /login.
func (k *Run) Login(username, client, visitor string, status int) rules.Verdict {
	k.T.Helper()
	return k.Do("POST", "/login", username, client, visitor, status)
}
