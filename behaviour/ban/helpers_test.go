package ban_test

import (
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// The ban tests run on internal/rulestest's helpers.

var t0 = rulestest.T0

const accountVisitors = rulestest.AccountVisitors

func newEngine(t *testing.T, store rules.Store) *rules.Engine { return rulestest.NewEngine(t, store) }
