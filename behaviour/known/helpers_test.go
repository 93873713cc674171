package known_test

import (
	"fmt"
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// The known callers' tests run on internal/rulestest's helpers.

var t0 = rulestest.T0

func load(t *testing.T, src string) *rules.Policy { return rulestest.Load(t, src) }

func newEngine(t *testing.T) *rules.Engine { return rulestest.NewEngine(t, nil) }

const accountVisitors = rulestest.AccountVisitors

// valuesRun is a rulestest.Run whose logins carry a JSON body as
// written.
type valuesRun struct{ *rulestest.Run }

func newValuesRun(t *testing.T, src string) *valuesRun { return &valuesRun{rulestest.NewRun(t, src)} }

// login sends POST /login from client with body as visitor, settled with
// status, and returns the verdict.
func (v *valuesRun) login(client, body, visitor string, status int) rules.Verdict {
	v.T.Helper()
	return v.send("/login", client, body, visitor, status).Verdict
}

// send decides POST path from client with body as visitor ("" none),
// settled with status.
func (v *valuesRun) send(path, client, body, visitor string, status int) rules.Decision {
	v.T.Helper()
	return v.Send(rulestest.Req{Method: "POST", Path: path, Client: client, Fields: rulestest.JSON(body)}, visitor, status)
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
