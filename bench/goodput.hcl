# bench/goodput.hcl: the edge's side of the goodput run (issue 27, goal 3;
# bench/run.sh -goodput, the load tool's goodput scenario). One rule, per
# client address, on the two routes the users and the flood share: 1
# request a second with a burst of 5, a sensitive rule (a bare 429, as
# on any login route). The users send one request every 2 seconds each
# (50 users at 25 a second in all), well inside it; the flood's 10,000
# addresses each send rate ÷ 10,000 a second, several times over it at
# the rates the run uses (3 a second and more), so the rule refuses most
# of the flood and none of the users. bench/goodput-nginx.conf is the same rule for NGINX
# limit_req. Not a policy to deploy.

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

# Counters in this process's memory: room for every address of the load.
store "memory" {
  max_keys = 1000000
}

rule "login-per-ip" {
  paths     = ["/login", "/otp/send"]
  methods   = ["POST"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 1
  period    = "1s"
  burst     = 5
  sensitive = true
}
