# adaptive: the policy of `go run ./loadtest -scenario adaptive`.
#
# One adaptive rule on GET /api/search (docs/policy.md, "Adaptive
# concurrency"): the gradient method between 5 and 200 requests in flight,
# starting at 20. The upstream is the scenario's own demo origin
# (-adaptive-origin), whose latency on the route the scenario raises and
# lowers; start the edge first, then the scenario (no -demo: the scenario
# is the origin).
#
#   go run ./cmd/edge -config loadtest/testdata/adaptive.hcl
#   go run ./loadtest -scenario adaptive -target http://127.0.0.1:18080 -target-metrics http://127.0.0.1:19901/metrics

edge {
  listen           = "127.0.0.1:18080"        # the edge the scenario talks to
  admin_listen     = "127.0.0.1:19901"        # -target-metrics: edge_adaptive_limit, edge_adaptive_in_flight
  upstream         = "http://127.0.0.1:19011" # the scenario's demo origin (-adaptive-origin)
  upstream_timeout = "10s"                    # longer than any latency the scenario sets
}

# The limit follows the origin's latency; a request over it is shed (503).
rule "adaptive-search" {
  methods   = ["GET"]
  paths     = ["/api/search"]
  algorithm = "concurrency"
  adaptive {
    method  = "gradient"
    min     = 5
    max     = 200
    initial = 20
  }
}
