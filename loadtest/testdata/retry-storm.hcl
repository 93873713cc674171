# retry-storm: the policy of `go run ./loadtest -scenario retry-storm`.
#
# Four routes, one per kind of client, each limited by one counter for the
# whole route: 100 requests per fixed window of 4 s (-storm-window repeats
# the period; change both together). The scenario sends -clients requests
# at once right after a window starts, so all but 100 are refused with the
# same true wait, and watches when they come back.
#
#   go run ./cmd/edge -demo -config loadtest/testdata/retry-storm.hcl
#   go run ./loadtest -scenario retry-storm -target http://127.0.0.1:18080

edge {
  listen          = "127.0.0.1:18080"        # the edge the scenario talks to
  admin_listen    = "127.0.0.1:19901"        # metrics and health, not used by the scenario
  upstream        = "http://127.0.0.1:19000" # `edge -demo` runs the demo origin here
  trusted_proxies = ["127.0.0.1/32", "::1/128"]
}

# Naive clients: they retry exactly at Retry-After.
rule "storm-naive" {
  paths     = ["/storm/naive"]
  key       = ["route"]
  algorithm = "fixed_window"
  limit     = 100
  period    = "4s"
}

# The same rule with retry_after_jitter: each refusal's Retry-After (and
# RateLimit t) is the true wait plus up to 100% more, in whole seconds.
rule "storm-jitter" {
  paths              = ["/storm/jitter"]
  key                = ["route"]
  algorithm          = "fixed_window"
  limit              = 100
  period             = "4s"
  retry_after_jitter = "100%"
}

# Pacing clients: full-jitter backoff on top of the edge's wait.
rule "storm-pacing" {
  paths     = ["/storm/pacing"]
  key       = ["route"]
  algorithm = "fixed_window"
  limit     = 100
  period    = "4s"
}

# Pacing clients with a retry budget (retries at most 10% of requests).
rule "storm-budget" {
  paths     = ["/storm/budget"]
  key       = ["route"]
  algorithm = "fixed_window"
  limit     = 100
  period    = "4s"
}
