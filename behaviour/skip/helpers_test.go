package skip_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// The minimum of rules' test helpers these tests use (rules/engine_test.go).

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
	method, path, host, client string
	f                          fields
}

func (r req) build() *rules.Request {
	return &rules.Request{
		Method: []byte(r.method),
		Path:   route.AppendMatchPath(nil, []byte(r.path), true),
		Host:   []byte(r.host),
		Client: netip.MustParseAddr(r.client),
		Fields: r.f,
	}
}

var t0 = time.Unix(1_800_000_000, 0)

func check(e *rules.Engine, p *rules.Policy, r req, s *rules.Scratch) rules.Decision {
	return e.Check(context.Background(), t0, p, r.build(), s)
}
