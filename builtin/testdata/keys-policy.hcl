# Every characteristic this build has, alone and together: the counter keys
# they make must never change between releases (TestCounterKeysUnchanged).
edge {
  trusted_proxies = ["127.0.0.1/32"]
}

identity {
  phone       = ["json:phone", "form:phone", "query:phone"]
  otp_session = ["json:challenge_id", "form:challenge_id"]
}

visitor {
  mint_limit = 3
  # The golden predates the mint reserve (issue 24), whose two ops per
  # cookieless request would come after these; its keys are new ones.
  mint_reserve = 0
}

rule "by-ip" {
  key    = ["ip"]
  limit  = 5
  period = "1m"
}
rule "by-network" {
  key         = ["ip"]
  ipv4_prefix = 24
  ipv6_prefix = 48
  limit       = 5
  period      = "1m"
}
rule "by-visitor" {
  key    = ["visitor"]
  limit  = 3
  period = "1m"
}
rule "by-route" {
  key    = ["route"]
  limit  = 9
  period = "1m"
}
rule "by-global" {
  key    = ["global"]
  limit  = 50
  period = "1m"
}
rule "by-header" {
  key    = ["header:X-Api-Key"]
  limit  = 2
  period = "1m"
}
rule "by-cookie" {
  key    = ["cookie:session"]
  limit  = 2
  period = "1m"
}
rule "by-query" {
  key    = ["query:client_id"]
  limit  = 2
  period = "1m"
}
rule "by-json" {
  key    = ["json:user.id"]
  limit  = 2
  period = "1m"
}
rule "by-form" {
  key    = ["form:user_id"]
  limit  = 2
  period = "1m"
}
rule "by-phone" {
  paths  = ["/otp/*"]
  key    = ["phone"]
  limit  = 3
  period = "15m"
}
rule "by-range" {
  paths  = ["/otp/*"]
  key    = ["phone_range"]
  limit  = 4
  period = "1h"
}
rule "by-country" {
  paths  = ["/otp/*"]
  key    = ["phone_country"]
  limit  = 6
  period = "1h"
}
rule "by-session" {
  paths  = ["/otp/verify"]
  key    = ["otp_session"]
  limit  = 2
  period = "15m"
  count  = "attempts"
}
rule "by-ip-and-route" {
  key       = ["ip", "route"]
  limit     = 4
  period    = "1m"
  algorithm = "sliding_window"
}
rule "by-visitor-and-phone" {
  paths  = ["/otp/*"]
  key    = ["visitor", "phone"]
  limit  = 2
  period = "1m"
}
rule "countries" {
  paths  = ["/otp/send"]
  action = "deny"
  when {
    phone_country_not_in = ["US", "GB"]
  }
}
rule "known-visitors-only" {
  paths  = ["/members/*"]
  key    = ["ip"]
  limit  = 1
  period = "1m"
  when {
    visitor_valid = false
  }
}
