package rules_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
)

// Helpers of the tests that use known visitors through builtin (ban_test.go;
// behaviour/known has the known callers' own tests).

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
	return k.do("POST", "/login", username, client, visitor, status)
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
