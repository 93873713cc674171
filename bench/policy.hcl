# bench/policy.hcl: the bench policy of issue 16 (bench/run.sh). Five rules
# that match every request of the bench load (GET /api/bench with
# X-Forwarded-For and X-Api-Key) and never refuse it: limits far above
# what one machine can send, so every target forwards every request and
# the rules' whole cost is paid on each one. Not a policy to deploy.

edge {
  # bench/run.sh overrides the three addresses with -listen, -admin and
  # -upstream.
  listen       = "127.0.0.1:18080"
  admin_listen = "127.0.0.1:19901"
  upstream     = "http://127.0.0.1:19000"

  # The load tool speaks for many clients through X-Forwarded-For, as a
  # load balancer in front of the edge would.
  trusted_proxies  = ["127.0.0.1/32", "::1/128"]
  forwarded_header = "x-forwarded-for"
}

# Counters in this process's memory; room for every key of the load.
store "memory" {
  max_keys = 1000000
}

# Per client address: 100,000 a second, as a burst of 100,000.
rule "bench-per-ip" {
  paths     = ["/*"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 100000
  period    = "1s"
  burst     = 100000
}

# Per network: an IPv4 /24 or an IPv6 /48, a million in 10 seconds.
rule "bench-per-network" {
  paths       = ["/*"]
  key         = ["ip"]
  ipv4_prefix = 24
  ipv6_prefix = 48
  algorithm   = "sliding_window"
  limit       = 1000000
  period      = "10s"
}

# Per API key (the load sends X-Api-Key from a pool of keys).
rule "bench-per-api-key" {
  paths     = ["/*"]
  key       = ["header:X-Api-Key"]
  algorithm = "token_bucket"
  limit     = 100000
  period    = "1s"
  burst     = 100000
}

# Per route: one counter per path, a million a second. The bench load
# sends one path, so on Redis this is a hot key: budget_lease has each
# node take 100 units in one call and spend them itself (the memory store
# ignores the block).
rule "bench-per-route" {
  paths     = ["/*"]
  key       = ["route"]
  algorithm = "gcra"
  limit     = 1000000
  period    = "1s"
  burst     = 1000000
  budget_lease {
    units = 100
  }
}

# A tighter per-address limit tried in shadow: decided and counted, never
# enforced (and still above the load, so it logs nothing per request).
rule "bench-per-ip-shadow" {
  paths     = ["/*"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 50000
  period    = "1s"
  burst     = 50000
  dry_run   = true
}
