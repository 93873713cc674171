# queue: the policy of `go run ./loadtest -scenario queue`.
#
# One queue = true leaky_bucket rule, the issue's: a burst of 20 at 5 a
# second (-queue-burst and -queue-rate repeat them; change both together),
# keyed by a header the scenario sets to a fresh value on each run, so every
# run starts on an empty bucket. The upstream is the scenario's own origin
# (-queue-origin), which records when each request reaches it; start the
# edge first, then the scenario (no -demo: the scenario is the origin).
#
#   go run ./cmd/edge -config loadtest/testdata/queue.hcl
#   go run ./loadtest -scenario queue -target http://127.0.0.1:18080 -target-metrics http://127.0.0.1:19901/metrics

edge {
  listen       = "127.0.0.1:18080"        # the edge the scenario talks to
  admin_listen = "127.0.0.1:19901"        # -target-metrics: edge_requests_total, edge_queue_held
  upstream     = "http://127.0.0.1:19010" # the scenario's recording origin (-queue-origin)
}

# Held and released at 5 a second, up to 20 at once; the 21st is refused.
rule "queue-burst" {
  paths     = ["/queue/*"]
  key       = ["header:X-Queue-Run"]
  algorithm = "leaky_bucket"
  limit     = 5
  period    = "1s"
  burst     = 20
  queue     = true
}
