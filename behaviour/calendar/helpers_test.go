package calendar_test

import (
	"net/netip"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// load compiles src with the build's features, failing t on an error.
func load(t *testing.T, src string) *rules.Policy {
	t.Helper()
	p, diags := builtin.Load("test.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// newStore is a memory store, closed when t ends.
func newStore(t *testing.T) rules.Store {
	t.Helper()
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return ms
}

// newEngine is an engine on a memory store of its own.
func newEngine(t *testing.T) *rules.Engine {
	t.Helper()
	e, err := rules.NewEngine(rules.EngineOptions{Store: newStore(t), Secret: []byte("test secret")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// get is a GET of path from client.
func get(path, client string) *rules.Request {
	return &rules.Request{
		Method: []byte("GET"),
		Path:   route.AppendMatchPath(nil, []byte(path), true),
		Client: netip.MustParseAddr(client),
	}
}
