package known_test

import (
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

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
