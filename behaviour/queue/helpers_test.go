package queue_test

import (
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// The queue tests run on internal/rulestest's helpers.

var t0 = rulestest.T0

func loadDiags(src string) (*rules.Policy, hcl.Diagnostics) { return rulestest.LoadDiags(src) }

// costEngine is a rulestest.Run of the policy under test.
type costEngine struct{ *rulestest.Run }

func newCostEngine(t *testing.T, src string) *costEngine {
	return &costEngine{rulestest.NewRun(t, src)}
}

// send decides a GET of path from one client at k.Now.
func (k *costEngine) send(path string, f rules.Fields) rules.Decision {
	return k.Check(rulestest.Req{Method: "GET", Path: path, Client: "192.0.2.9", Fields: f})
}
