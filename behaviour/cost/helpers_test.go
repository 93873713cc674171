package cost_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// The minimum of rules' own test helpers (rules/engine_test.go) the cost
// tests use: a package's test helpers cannot be imported.

var t0 = time.Unix(1_800_000_000, 0)

// fields is a map-backed rules.Fields with headers alone.
type fields struct{ header map[string]string }

func (f fields) Header(n []byte) []byte { return bytesOf(f.header, n) }
func (fields) Cookie([]byte) []byte     { return nil }
func (fields) Query([]byte) []byte      { return nil }
func (fields) RawQuery() []byte         { return nil }
func (fields) Body() ([]byte, []byte)   { return nil, nil }
func (fields) Cookies() []byte          { return nil }

func bytesOf(m map[string]string, n []byte) []byte {
	if v, ok := m[string(n)]; ok {
		return []byte(v)
	}
	return nil
}

func loadDiags(src string) (*rules.Policy, hcl.Diagnostics) {
	return builtin.Load("test.hcl", []byte(src))
}

func load(t *testing.T, src string) *rules.Policy {
	t.Helper()
	p, diags := loadDiags(src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// newEngine returns an engine on store, a new memory store when nil.
func newEngine(t *testing.T, store rules.Store) *rules.Engine {
	t.Helper()
	if store == nil {
		ms, err := memstore.New(memstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ms.Close() })
		store = ms
	}
	e, err := rules.NewEngine(rules.EngineOptions{Store: store, Secret: []byte("test secret")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type req struct{ method, path, client string }

func (r req) build() *rules.Request {
	return &rules.Request{
		Method: []byte(r.method),
		Path:   route.AppendMatchPath(nil, []byte(r.path), true),
		Client: netip.MustParseAddr(r.client),
	}
}
