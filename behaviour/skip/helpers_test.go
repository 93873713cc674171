package skip_test

import (
	"context"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// check decides r at rulestest.T0 on s.
func check(e *rules.Engine, p *rules.Policy, r rulestest.Req, s *rules.Scratch) rules.Decision {
	return e.Check(context.Background(), rulestest.T0, p, r.Build(), s)
}
