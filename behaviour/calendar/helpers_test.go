package calendar_test

import (
	"testing"

	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// The calendar tests run on internal/rulestest's helpers.

func load(t *testing.T, src string) *rules.Policy { return rulestest.Load(t, src) }

func newStore(t *testing.T) rules.Store { return rulestest.NewStore(t) }

func newEngine(t *testing.T) *rules.Engine { return rulestest.NewEngine(t, nil) }

// get is a GET of path from client.
func get(path, client string) *rules.Request {
	return rulestest.Req{Method: "GET", Path: path, Client: client}.Build()
}
