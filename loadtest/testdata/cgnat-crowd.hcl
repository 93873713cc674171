# cgnat-crowd: the policy of `go run ./loadtest -scenario cgnat-crowd`.
#
# 500 visitors share one public address, as behind a carrier-grade NAT, and
# each gets its own budget through a signed visitor ID (the __edge_vid
# cookie) instead of sharing the address's. The scenario's flags repeat the
# numbers below (-limit, -period, -ip-ceiling, -mint-limit, -mint-period);
# change both together.
#
#   go run ./cmd/edge -demo -config loadtest/testdata/cgnat-crowd.hcl
#   go run ./loadtest -scenario cgnat-crowd -target http://127.0.0.1:18080

edge {
  listen       = "127.0.0.1:18080"        # the edge the scenario talks to
  admin_listen = "127.0.0.1:19901"        # metrics and health, not used by the scenario
  upstream     = "http://127.0.0.1:19000" # `edge -demo` runs the demo origin here
  # The load tool speaks for the NAT's public address in X-Forwarded-For;
  # the edge believes it only from loopback.
  trusted_proxies = ["127.0.0.1/32", "::1/128"]
}

store "memory" {
  # About 503 keys per run (500 visitors, the cookieless bucket, the IP
  # ceiling, the mint budget), at a fresh address each time.
  max_keys = 100000
}

visitor {
  cookie     = "__edge_vid"           # the signed visitor ID
  secret_env = "EDGE_VISITOR_SECRETS" # unset: the node signs with a random secret of its own, fine for one node
  # New IDs per IP: a GCRA bucket of 600 per minute with a burst of 600, so
  # 500 visitors arriving at once all get theirs, and what is left (100,
  # plus 10 a second of refill) is all a cookie-cycling client can collect.
  mint_limit  = 600
  mint_period = "1m"
  max_age     = "720h" # a visitor keeps its ID for 30 days
  secure      = false  # the scenario speaks plain HTTP on loopback
}

# Ten API calls per 10 seconds per visitor. A short period keeps the run
# short: the scenario loads exactly one period.
#
# GCRA rather than sliding_window: a visitor's 8 calls (80%) fit its burst
# of 10 wherever they fall, and 4000 calls fit the ceiling's burst of 4500,
# so the crowd's verdict does not depend on how the run lines up with a
# window boundary; and GCRA allows exactly burst + elapsed / (period / limit)
# requests from an empty bucket, which gives the cookie-cycling attacker an
# exact bound to be held to (a sliding window's estimate lets up to about
# twice the limit through across a boundary, a loose bound to check).
rule "api-per-visitor" {
  paths     = ["/api/*"]
  key       = ["visitor"] # IP + visitor ID; no valid cookie: the IP's one cookieless bucket, also 10 per 10 s
  algorithm = "gcra"
  limit     = 10
  period    = "10s"
  # burst defaults to limit (10).
  #
  # All visitors of the IP together: 500 visitors × 8 calls = 4000 per
  # 10 s, plus headroom for the attacker's cookieless calls (at most 20 in
  # a period) and a few visitors more. The default (10 × limit = 100) would
  # refuse a crowd this size: a NAT's ceiling is sized for the NAT.
  ip_ceiling = 4500
}

# No rule matches /trace/*: the scenario's visitors fetch their IDs from
# /trace/warmup, which the demo origin answers 200, without spending any
# /api/* budget.
