# attacks-bans.hcl: the policy of the attacks scenario's ban-eviction class
# (issue 24, §1b): an ordinary (non-sensitive) rule with a ban on a small
# key budget. A flood of new keys evicts an ordinary rule's least recently
# used counters to make room; it must never evict a ban that still refuses.
# The shipped policy has no such rule, so the class is skipped there.
#
#   go run ./cmd/edge -demo -config loadtest/testdata/attacks-bans.hcl
#   go run ./loadtest -scenario attacks -target http://127.0.0.1:8080 \
#       -policy loadtest/testdata/attacks-bans.hcl -classes ban-eviction

edge {
  listen       = "127.0.0.1:8080"
  admin_listen = "127.0.0.1:9901"
  upstream     = "http://127.0.0.1:9000"
  # The attacks scenario plays many clients from loopback, as a trusted
  # proxy naming each in X-Forwarded-For.
  trusted_proxies = ["127.0.0.1/32", "::1/128"]
}

store "memory" {
  max_keys = 10000
}

# Two requests a second per client; a client that is refused is banned
# from the route for 10 minutes. Its budget holds 20 keys, bans included:
# the class floods it with 60 new ones (3 × max_keys) after the ban.
rule "api-ban-per-ip" {
  paths     = ["/api/banned/*"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 2
  period    = "1s"
  burst     = 2
  ban       = "10m"
  max_keys  = 20
  # One network may make half of this tiny budget (the store's 5% would be
  # one key a /48): the banned client and a user in its /48 both fit, and
  # the flood, from a new /48 each time, fills the budget.
  network_share = "50%"
}

test "a client over the limit is banned past the rule's period" {
  request {
    path   = "/api/banned/x"
    from   = "198.51.100.7"
    repeat = 2
    expect = "allow"
  }
  request {
    path   = "/api/banned/x"
    from   = "198.51.100.7"
    expect = "deny"
    rule   = "api-ban-per-ip"
  }
  request {
    after  = "5s"
    path   = "/api/banned/x"
    from   = "198.51.100.7"
    expect = "deny"
    rule   = "api-ban-per-ip"
  }
  request {
    path   = "/api/banned/x"
    from   = "198.51.100.8"
    expect = "allow"
  }
}
