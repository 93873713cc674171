package skip_test

import (
	"context"
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// The skip rules' tests run on internal/rulestest's helpers.

var t0 = rulestest.T0

func load(t *testing.T, src string) *rules.Policy { return rulestest.Load(t, src) }

func newEngine(t *testing.T) *rules.Engine { return rulestest.NewEngine(t, nil) }

func check(e *rules.Engine, p *rules.Policy, r rulestest.Req, s *rules.Scratch) rules.Decision {
	return e.Check(context.Background(), t0, p, r.Build(), s)
}
