// Package policytest runs a policy's own tests: its `test "NAME" { }`
// blocks, each a scripted sequence of requests with the decision the edge
// must reach for each (`edge test`).
//
// Parse decodes the test blocks of a policy file, Check checks them against
// the compiled policy (the rules they name, a visitor block for the
// requests that carry a visitor), and Run runs them. Every test runs
// against a real edge, gateway.Server over the real Engine and a fresh
// memory store, with a simulated clock that starts at Epoch and a simulated
// origin (a loopback HTTP server answering each request's origin_status).
// Requests are read by fasthttp's own request parser from the bytes a
// client would send and handed to the server's handler, so the edge reads
// them as it reads a request from a socket.
//
// The package sits beside cmd/edge, above gateway: nothing imports it but
// cmd/edge. Parse and Check are pure; Run uses the network only on
// loopback and runs one test at a time. Run sets the visitor block's
// secret_env variable, when it is unset, for the length of the run.
package policytest
