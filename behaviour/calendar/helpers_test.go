package calendar_test

import (
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// get is a GET of path from client.
func get(path, client string) *rules.Request {
	return rulestest.Req{Method: "GET", Path: path, Client: client}.Build()
}
