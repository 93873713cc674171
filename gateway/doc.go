// Package gateway is the edge node's HTTP side: the public fasthttp server
// and its handler, the reverse proxy to the origin, the answers the edge
// gives itself, the admin listener and the node's metrics. It is the only
// part of the edge that serves HTTP (package demo, the test origin, serves
// its own); docs/architecture.md is the map of where it sits.
//
// A Server (New, from Options whose Policy and Store are required) carries a
// request along the path docs/architecture.md lays out:
//
//   - Accept (server.go, conns.go): NewHTTPServer and Serve bound every
//     connection: the policy's header_timeout and body_timeout (408 past
//     them), a 10s write timeout, 60s idle, an 8 KiB header cap (431 past
//     it), the policy's max_body_bytes (413 past it), and at accept, on the
//     socket peer, max_conns (the edge's 503 past it) and, for an untrusted
//     peer, max_conns_per_ip and max_conns_per_ipv6_prefix (the bare 429). A
//     request fasthttp cannot read is answered 400, 408, 413 or 431 in the
//     edge's own text, never 500 and never fasthttp's, and its bytes are
//     never logged.
//   - Decide (handler.go): Handler copies the few fields rules need into a
//     pooled rules.Request (the client from ipv6/ per docs/client-address.md,
//     the canonical path, host and method per docs/host-and-path.md, body
//     fields per docs/body-identities.md) and makes one rules.Engine.Check
//     call: one store call per request.
//   - Refuse (respond.go): a bare 429 on a sensitive route, an informative
//     429 with RateLimit headers (docs/headers.md) otherwise, 400 for a
//     missing or invalid identity, 503 when a fail-closed rule's store is
//     down (RFC 6585, RFC 9110).
//   - Forward (handler.go): one fasthttp.HostClient per upstream
//     (upstream.go: http:// or https:// with the policy's upstream_tls,
//     upstream_timeout, kept across reloads that change neither), with an
//     8 MiB response cap; each answer or failure feeds the origin's
//     passive health (upstream_health.go; docs/deploying.md, "The origin
//     over HTTPS, and its health"). Hop-by-hop headers, every
//     client-sent X-Edge-* and client-IP header, and other spellings of
//     headers the policy reads are removed; the edge sets its own
//     X-Forwarded-For, and the Host the origin receives is the one the
//     rules matched. Routes whose rules need it settle after the origin
//     answers (reset_on_success) in one more store call.
//
// The features' HTTP halves (the visitor cookie and X-Edge-Visitor, the
// bot score's headers, JA4 fingerprints) are extensions (package
// gateway/ext, Options.Extensions; extensions.go): the gateway opens them
// for every policy it installs and runs their hooks at each phase of a
// request, and imports no feature and no concrete store
// (imports_test.go).
//
// The admin listener (ServeAdmin, AdminHandler) serves /healthz, /readyz (200
// with the store degraded unless ?strict=1, so a fleet on one sick Redis is
// not pulled from its load balancer at once; the origin's health reported,
// never failing it) and /metrics, the Prometheus
// registry of Options.Registry: decisions per rule and outcome, requests per
// verdict, the store's own (Options.Collectors: the failure-handling
// store's breaker and counters, the Redis client's, from package
// nodestore), for a store with key budgets (the memory store) each rule's
// (docs/memory-store.md), the extensions' counters; the Go runtime's and the process's collectors,
// edge_build_info, and the request and origin latency histograms
// (latency_metrics.go). deploy/prometheus and deploy/grafana query them
// (deploy_files_test.go).
//
// A Server is safe for concurrent use. Reload swaps the policy atomically:
// requests in flight finish on the policy they started with. The decision
// path allocates nothing (alloc_test.go holds it to 0); per-request memory is
// pooled and never kept past the handler's return.
//
// The demo origin the edge is tried against lives in package demo; gateway
// imports it only in tests.
package gateway
