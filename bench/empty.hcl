# bench/empty.hcl: the edge with no rules (bench/run.sh's "edge without
# rules"): the same node, listener, proxy and client-address handling as
# bench/policy.hcl, nothing decided. Its throughput against the bench
# policy's is what the rules cost.

edge {
  listen       = "127.0.0.1:18080"
  admin_listen = "127.0.0.1:19901"
  upstream     = "http://127.0.0.1:19000"

  trusted_proxies  = ["127.0.0.1/32", "::1/128"]
  forwarded_header = "x-forwarded-for"
}

store "memory" {
  max_keys = 1000000
}
