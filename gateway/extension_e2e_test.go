package gateway

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules"
)

// The extension points proved from outside rules/ (docs/architecture.md,
// "Extension points"): a feature defined only in this test file adds a
// characteristic, a condition and a rule attribute with a Hook, and the
// real server counts on them. rules/ is not touched to add it.

// tenantFeature is the test feature: "tenant", the X-Tenant header's value
// (1 to 32 of [a-z0-9-]; anything else is Invalid, absence Missing); the
// tenant_in condition; and tenant_audit = true, a Hook that records the
// origin's statuses of the requests the rule counted.
type tenantFeature struct {
	resolutions atomic.Int64 // how often a request's tenant was resolved
	mu          sync.Mutex
	audited     []int // statuses the audit hook saw
}

func (f *tenantFeature) feature() rules.Feature {
	return rules.Feature{
		Name: "tenant",
		Characteristics: []rules.CharacteristicType{{Name: "tenant", Tag: 20, Compile: func(c *rules.Compiler, _ *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
			c.ReadsHeader("X-Tenant")
			return tenantChar{f: f, slot: c.Slot("tenant.value")}
		}}},
		Conditions: []rules.ConditionType{{Name: "tenant_in", Compile: func(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
			var list []string
			if !c.Append(gohcl.DecodeExpression(a.Expr, nil, &list)) {
				return nil
			}
			return tenantIn{char: tenantChar{f: f, slot: c.Slot("tenant.value")}, in: list}
		}}},
		RuleAttrs: []rules.RuleAttrType{{Name: "tenant_audit", Compile: func(c *rules.Compiler, r *rules.Rule, a *hcl.Attribute) {
			var on bool
			if c.Append(gohcl.DecodeExpression(a.Expr, nil, &on)) && on {
				r.Hooks = append(r.Hooks, auditHook{f})
			}
		}}},
	}
}

// tenantChar resolves the tenant once per request into its memo slot.
type tenantChar struct {
	f    *tenantFeature
	slot int
}

var tenantHeader = []byte("X-Tenant")

func (t tenantChar) resolve(req *rules.Request, s *rules.Scratch) *rules.Memo {
	m := s.Memo(t.slot)
	if m.Done {
		return m
	}
	t.f.resolutions.Add(1)
	m.Done, m.Status = true, rules.Missing
	v := req.Fields.Header(tenantHeader)
	if len(v) == 0 {
		return m
	}
	m.Status = rules.Present
	if len(v) > 32 {
		m.Status = rules.Invalid
	}
	for _, c := range v {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			m.Status = rules.Invalid
		}
	}
	m.Value = append(m.Value[:0], v...)
	return m
}

func (t tenantChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	m := t.resolve(req, s)
	if m.Status != rules.Present {
		return buf, m.Status
	}
	return rules.AppendValue(buf, m.Value), rules.Present
}

type tenantIn struct {
	char tenantChar
	in   []string
}

func (c tenantIn) Eval(req *rules.Request, s *rules.Scratch) rules.Status {
	m := c.char.resolve(req, s)
	if m.Status != rules.Present {
		return m.Status
	}
	if slices.Contains(c.in, string(m.Value)) {
		return rules.Present
	}
	return rules.Missing
}

type auditHook struct{ f *tenantFeature }

func (h auditHook) AfterOrigin(_ *rules.Match, _ []rules.Op, status int, _ []byte, ops []rules.Op) []rules.Op {
	h.f.mu.Lock()
	h.f.audited = append(h.f.audited, status)
	h.f.mu.Unlock()
	return ops
}

const tenantPolicy = `
rule "per-tenant" {
  paths  = ["/api/*"]
  key    = ["tenant"]
  limit  = 3
  period = "1m"
}

rule "acme-per-client" {
  paths        = ["/api/*"]
  key          = ["tenant", "ip"]
  limit        = 2
  period       = "1m"
  tenant_audit = true
  when {
    tenant_in = ["acme"]
  }
}
`

// TestFeatureDefinedOutsideRules runs a policy keyed on the test-only
// tenant characteristic through the real server on loopback.
func TestFeatureDefinedOutsideRules(t *testing.T) {
	f := &tenantFeature{}
	p, diags := rules.Load("tenant.hcl", []byte(tenantPolicy), append(builtin.Features(), f.feature())...)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	n := startNode(t, p, nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}})
	get := func(tenant string) int {
		t.Helper()
		var h []string
		if tenant != "" {
			h = []string{"X-Tenant", tenant}
		}
		return do(t, "GET", "http://"+n.addr+"/api/items", "", h...).status
	}

	// acme: both rules apply; the per-client rule (2) refuses the third.
	before := f.resolutions.Load()
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if got := get("acme"); got != want {
			t.Fatalf("acme request %d: got %d, want %d", i+1, got, want)
		}
	}
	// One resolution per request, though two rules and a condition use it.
	if got := f.resolutions.Load() - before; got != 3 {
		t.Errorf("3 acme requests resolved the tenant %d times, want 3 (once each)", got)
	}
	// The hook saw the two requests the rule counted and allowed, with the
	// origin's status; the refused third never reached the origin.
	f.mu.Lock()
	audited := slices.Clone(f.audited)
	f.mu.Unlock()
	if !slices.Equal(audited, []int{200, 200}) {
		t.Errorf("audit hook saw statuses %v, want [200 200]", audited)
	}

	// beta: only per-tenant applies (the condition does not hold): 3 pass.
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if got := get("beta"); got != want {
			t.Fatalf("beta request %d: got %d, want %d", i+1, got, want)
		}
	}
	// An invalid tenant is a 400 (invalid_identity defaults to reject);
	// no tenant: the rules skip (missing_identity defaults to skip).
	if got := get("Acme!"); got != http.StatusBadRequest {
		t.Errorf("invalid tenant: got %d, want 400", got)
	}
	if got := get(""); got != http.StatusOK {
		t.Errorf("no tenant: got %d, want 200", got)
	}
	if got := n.decisions("acme-per-client", "deny"); got != 1 {
		t.Errorf("acme-per-client deny count: got %d, want 1", got)
	}

	// The header the feature reads is forwarded only under its spelling
	// (Compiler.ReadsHeader): another spelling is stripped.
	do(t, "GET", "http://"+n.addr+"/other", "", "X-Tenant", "gamma", "X_Tenant", "delta")
	last := n.last(t)
	if v := last.Headers["X-Tenant"]; v != "gamma" {
		t.Errorf("origin got X-Tenant %q, want gamma", v)
	}
	for name := range last.Headers {
		if strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "X-Tenant") && name != "X-Tenant" {
			t.Errorf("origin got the other spelling %q of X-Tenant", name)
		}
	}
}

// TestFeatureConflictsAreRefused: two features may not claim one name or
// one key tag, which would make two characteristics share counters.
func TestFeatureConflictsAreRefused(t *testing.T) {
	f := &tenantFeature{}
	dup := f.feature()
	dup.Name = "tenant-again"
	_, diags := rules.Load("tenant.hcl", []byte(tenantPolicy), append(builtin.Features(), f.feature(), dup)...)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "registered twice") {
		t.Errorf("two features registering tenant: got %v, want a conflict", diags)
	}
	tagClash := f.feature()
	tagClash.Characteristics[0].Name = "other"
	tagClash.Characteristics[0].Tag = rules.TagPhone
	_, diags = rules.Load("tenant.hcl", []byte(`rule "a" {
  key    = ["ip"]
  limit  = 1
  period = "1m"
}
`), append(builtin.Features(), tagClash)...)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "key tag") {
		t.Errorf("a characteristic reusing phone's tag: got %v, want a conflict", diags)
	}
}
