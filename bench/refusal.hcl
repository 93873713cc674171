# bench/refusal.hcl: the edge's side of the refusal-path run (issue 27,
# goal 2; bench/run.sh refusal). One rule that refuses the whole bench
# load once each address has had its one request: per client address, 1
# an hour with a burst of 1, a sensitive rule, so every refusal is a bare
# 429 from the memory store and never reaches the origin.
# bench/refusal-nginx.conf is the same rule for NGINX limit_req. Not a
# policy to deploy.

edge {
  # bench/refusal.sh overrides the three addresses with -listen, -admin
  # and -upstream.
  listen       = "127.0.0.1:18080"
  admin_listen = "127.0.0.1:19901"
  upstream     = "http://127.0.0.1:19000"

  trusted_proxies  = ["127.0.0.1/32", "::1/128"]
  forwarded_header = "x-forwarded-for"
}

store "memory" {
  max_keys = 1000000
}

rule "refuse-per-ip" {
  paths     = ["/*"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 1
  period    = "1h"
  burst     = 1
  sensitive = true
}
