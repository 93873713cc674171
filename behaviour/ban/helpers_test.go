package ban_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// The minimum of rules' test helpers these tests need (rules/engine_test.go,
// rules/known_test.go).

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

// fields is a request's body, and nothing else.
type fields struct{ contentType, body string }

func (f fields) Body() ([]byte, []byte) { return []byte(f.contentType), []byte(f.body) }
func (fields) RawQuery() []byte         { return nil }
func (fields) Header([]byte) []byte     { return nil }
func (fields) Cookie([]byte) []byte     { return nil }
func (fields) Query([]byte) []byte      { return nil }
func (fields) Cookies() []byte          { return nil }

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

// knownRun drives one engine and store through requests, settling each
// forwarded one with the origin's answer, on a scripted clock.
type knownRun struct {
	t   *testing.T
	e   *rules.Engine
	p   *rules.Policy
	vc  *nat.Config
	now time.Time
	s   *rules.Scratch
}

// do sends method path with a JSON body naming username from client with
// visitor ("" none), settling it with status if forwarded.
func (k *knownRun) do(method, path, username, client, visitor string, status int) rules.Verdict {
	k.t.Helper()
	k.s.Begin(k.p)
	var id nat.ID
	copy(id[:], visitor)
	k.vc.SetVisitor(k.s, id, visitor != "")
	r := req{method: method, path: path, client: client,
		f: fields{contentType: "application/json", body: fmt.Sprintf(`{"username":%q}`, username)}}
	d := k.e.Check(context.Background(), k.now, k.p, r.build(), k.s)
	if d.Verdict == rules.Forward && d.Settle {
		if _, err := k.e.Settle(context.Background(), k.now, k.s, status, nil); err != nil {
			k.t.Fatal(err)
		}
	}
	return d.Verdict
}
