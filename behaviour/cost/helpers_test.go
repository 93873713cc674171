package cost_test

import (
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// The cost tests run on internal/rulestest's helpers.

var t0 = rulestest.T0

func loadDiags(src string) (*rules.Policy, hcl.Diagnostics) { return rulestest.LoadDiags(src) }

func load(t *testing.T, src string) *rules.Policy { return rulestest.Load(t, src) }

func newEngine(t *testing.T, store rules.Store) *rules.Engine { return rulestest.NewEngine(t, store) }
