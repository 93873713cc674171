# policies.hcl: the shipped example policy for edge.
#
# `go run ./cmd/edge -demo` serves it in front of the built-in demo origin;
# `go run ./cmd/edge validate` checks it. Every attribute is documented in
# README.md ("Policy reference"). Limits here are realistic but small enough
# to trip by hand with curl.

edge {
  # Public listener: clients (or your load balancer) connect here.
  listen = "127.0.0.1:8080"

  # Admin listener: /healthz, /readyz, /metrics. Keep it on loopback.
  admin_listen = "127.0.0.1:9901"

  # The origin the edge protects. With -demo, the built-in demo origin
  # listens here.
  upstream = "http://127.0.0.1:9000"

  # Peers allowed to say who the client is. Only when the socket peer is in
  # this list does the edge read the forwarding header, taking the
  # right-most address that is not itself a trusted proxy. Put your load
  # balancers here; loopback is trusted so the README's curl examples can
  # play many clients. Anyone else's X-Forwarded-For is ignored and
  # replaced before it reaches the origin.
  trusted_proxies = ["127.0.0.1/32", "::1/128"]

  # The one forwarding header read from trusted proxies:
  # "x-forwarded-for" (default) or "forwarded" (RFC 7239).
  forwarded_header = "x-forwarded-for"

  # Client grouping: an IPv4 client is its /32; an IPv6 host picks its own
  # 64-bit interface ID, so IPv6 clients are counted per /64.
  ipv4_prefix = 32
  ipv6_prefix = 64

  # An IPv6 address that embeds an IPv4 address counts as that IPv4 address
  # (at ipv4_prefix), so one IPv4 host gets one budget however it is spelled:
  # 6to4 (2002::/16), Teredo (2001::/32), the NAT64 well-known prefix
  # 64:ff9b::/96 and IPv4-compatible ::a.b.c.d always do. List your own
  # NAT64/SIIT prefixes here, each with its length (/32, /40, /48, /56, /64
  # or /96: RFC 6052 places the IPv4 address by it). docs/client-address.md
  # nat64_prefixes = ["2001:db8:64::/96"]

  # Request bodies above this many bytes are refused with 413.
  max_body_bytes = 65536

  # Connections are a budget too. The node holds at most max_conns open
  # connections (one more is answered 503 and closed); one untrusted peer
  # at most max_conns_per_ip, and the peers of one IPv6 prefix (ipv6_prefix
  # above) max_conns_per_ipv6_prefix, and the peers of one client network
  # (an IPv4 /24, an IPv6 /48: the store's network prefixes) together
  # max_conns_per_network (one more: the bare 429), so that filling the
  # node takes 10 networks, not the /64s of one /48. A browser opens up to
  # 6 connections to a host, so 256 is about 40 browsers loading at once
  # behind one address (a CGNAT address, an office); raise it for a
  # larger NAT. A peer in trusted_proxies (your load balancer,
  # which carries many clients) is held to max_conns alone: cap clients at
  # the load balancer. A request's header must arrive within header_timeout
  # (from the connection's opening, or the request's first byte on a
  # kept-alive one) and its body within body_timeout after it, or it is
  # answered 408 and its connection closed, so half-sent requests free
  # their connections. docs/deploying.md, "Connection budgets".
  max_conns                 = 10000
  max_conns_per_ip          = 256
  max_conns_per_ipv6_prefix = 256
  max_conns_per_network     = 1024
  header_timeout            = "10s"
  body_timeout              = "30s"

  # "/LOGIN" and "/login" are one route unless this says "sensitive".
  path_case = "insensitive"

  # true puts every rule in dry-run: decide, log and count "would have
  # refused" (edge_decisions_total{decision="dry_run_deny"}), refuse nothing.
  # The -dry-run flag does the same without editing the file.
  dry_run = false

  # Environment variable holding the secret that keys counter hashes, used
  # as given. Unset with the memory store: a random secret and a warning at
  # start. With a Redis store it must be set, to at least 32 bytes (for
  # example `openssl rand -hex 32`), or the node refuses to start.
  key_secret_env = "EDGE_KEY_SECRET"

  # Load shedding: when the origin is saturated, the edge answers 503
  # (never 429: a 429 judges the caller, a 503 the system) before anything
  # is counted, lowest priority first. Saturated means this node's requests
  # at the origin reach max_in_flight × the request's priority's share, or
  # an adaptive rule's reach its limit × that share. A request's priority is
  # the highest of its matching rules' (priority = "low", "normal", "high"
  # or "critical"; "normal" when none sets one). Here API reads are shed
  # from 500 in flight, logins from 900, OTP verifies only at 1000. An
  # ordinary route's 503 carries Retry-After (retry_after, spread by
  # retry_after_jitter, never earlier: here 2 or 3 seconds; Retry-After is
  # whole seconds, so a jitter under one second spreads nothing and validate
  # says so); a sensitive route's is bare. docs/policy.md, "Load shedding".
  load_shedding {
    # max_in_flight is per node; a critical request is shed only at 100%.
    max_in_flight      = 1000
    shed_at            = { low = "50%", normal = "75%", high = "90%" }
    retry_after        = "2s"
    retry_after_jitter = "50%"
  }
}

# Counters in this process's memory. Each rule has a key budget of its own
# (as NGINX gives each limit_req_zone its own memory), so a flood of new keys
# on one route never evicts another rule's counters: a rule's max_keys, or an
# equal share of this max_keys among the rules that set none (the API rules
# and the visitor mint budget here: 25000 keys each, and as many for the mint
# budget's fingerprints). Within a budget, state
# that has decayed goes first; then an ordinary rule evicts its least
# recently used key (counted in edge_store_evictions_total), while a
# sensitive rule never evicts a live counter: a new key is answered by its
# on_store_error instead (edge_store_budget_full_total). A key costs about
# 220 bytes (250 to 350 for a sliding_log, by limit; about 480 for a
# concurrency rule of limit 10 while its slots are taken); this file's
# budgets together hold 1195000 keys (the known blocks' and ban_by's markers
# included), about 255 MiB when every one is full (docs/memory-store.md).
# Bans and known visitors are kept beside each rule's counters, in a budget
# of their own as large, never evicted while they last.
store "memory" {
  max_keys = 100000
  # One client network may not fill a sensitive rule's budget: each IPv6 /48
  # or IPv4 /24 may make at most network_share of each sensitive rule's keys
  # (2500 of otp-send-per-phone's 50000 phones). A new key from a network at
  # its share is refused by that rule, for that network only: its 429,
  # counted in edge_store_network_full_total, not the 503 a sensitive rule's
  # full budget would give everyone. An ordinary rule evicts when its budget
  # is full, so it has no share unless it sets its own network_share (a
  # large NAT's /24 may fill it legitimately); "100%" is no bound. 20
  # networks can still fill a budget (docs/attacks.md).
  network_share       = "5%"
  network_ipv4_prefix = 24
  network_ipv6_prefix = 48
}

# NAT-aware visitor IDs. Carrier-grade NAT puts hundreds of phones behind one
# public IPv4 address: a per-IP login limit then leaves each user a sliver.
# The edge sets a signed cookie (a random 128-bit visitor ID, HMAC-SHA256) on
# forwarded responses, and rules keyed on "visitor" count per IP + visitor.
# Clients without a valid cookie (none, tampered, expired, unknown secret)
# share the IP's cookieless bucket; all visitors of an IP share the rule's
# ip_ceiling, so stockpiled cookies cannot multiply a client's budget.
visitor {
  # The cookie's name.
  cookie = "__edge_vid"
  # Environment variable with the signing secrets, comma-separated: the first
  # signs, all verify (rotate by putting the new one first). Unset: a random
  # secret and a warning (a fleet needs one shared secret).
  secret_env = "EDGE_VISITOR_SECRETS"
  # At most mint_limit new visitor IDs per IP per mint_period; beyond it the
  # edge mints no more and those clients stay in the cookieless bucket, so a
  # cookie-dropping attacker gains at most this many fresh budgets.
  mint_limit  = 10
  mint_period = "1m"
  # Cookie lifetime.
  max_age = "720h"
  # A reserve of as many more a period per IP (the default, mint_limit) for
  # the clients that are not minting in bulk: once mint_limit is spent, a
  # client whose fingerprint (a keyed hash of its User-Agent,
  # Accept-Language and JA4) minted nothing this period behind the address
  # gets one from it, so a cookie-dropping attacker behind a NAT does not
  # leave every new visitor there without a cookie. 0: no reserve.
  mint_reserve = 10
  # The demo speaks plain HTTP on loopback; keep Secure (true) behind TLS.
  secure = false
}

# ---- Known callers ----------------------------------------------------------
# No defence may be aimed at the people it protects. A known block names the
# requests whose success makes their caller known, what recognises the caller
# (by) and for how long after its last success (for). A rule that lists the
# block in exempt_known does not hold a known caller to what it shares with
# others (a network's budget, a numbering block's, every visitor's of one
# address): it is decided, never refused nor charged by the rule, and the
# rule's ban spares it. Its own limits (its visitor, its phone, its account
# from its address) hold as before. The marker is a keyed hash in the store,
# written after the origin's success (success_status, default 200, 201, 204,
# or X-Edge-Outcome: success) in the call the route makes after the answer
# (on /otp/send, one call more), and checked in the call before the main one.
# A marker names its caller exactly: an account as it was sent (an attacker's
# own "rené" is not the victim's "rene" it is counted with), a browser by its
# visitor ID wherever it logs in from. A client without a valid visitor
# cookie (the address's cookieless bucket) is never known. docs/policy.md,
# "known".

# A browser that logged in to an account. Known by its visitor ID and that
# account together: an attacker that logs in to an account of its own makes
# its visitors known for that account only, never for a victim's.
known "logged-in" {
  methods = ["POST"]
  paths   = ["/login"]
  by      = ["visitor", "account"]
  for     = "30d"
  # Its own key budget in the memory store: the markers are never evicted
  # while they last; with the budget full, no new caller becomes known.
  max_keys = 100000
}

# A phone a code was sent to (the origin's success on /otp/send), for the
# code's life. Exempt from nothing itself: verified-phone requires it.
known "code-sent" {
  methods  = ["POST"]
  paths    = ["/otp/send"]
  by       = ["phone"]
  for      = "15m"
  max_keys = 50000
}

# A phone whose code was verified: its owner reads the codes it is sent.
# requires: a verify records the phone only when a code was sent to it in
# the last 15 minutes (its code-sent marker is live), since an origin that
# finds a challenge by its ID alone verifies the phone the code went to,
# whatever phone the verify names. Each such phone was a send counted on
# its block (otp-send-per-range): at most 5 new known phones per block per
# hour.
known "verified-phone" {
  methods  = ["POST"]
  paths    = ["/otp/verify"]
  by       = ["phone"]
  for      = "30d"
  requires = ["code-sent"]
  max_keys = 50000
}

# ---- Login ------------------------------------------------------------------
# Sensitive rules answer a bare 429 (no RateLimit headers, no rule name, no
# Retry-After: nothing an attacker can learn from) and fail closed.

# Five login attempts a minute per visitor (a browser with its cookie, or an
# IP's cookieless clients together), as a burst of five then one every 12
# seconds (GCRA: one timestamp per key, retry time for free). All visitors
# of one IP together get at most 100 a minute (ip_ceiling; default 10 × limit),
# except a browser logging in to an account it logged in to before
# (exempt_known): an attacker filling the ceiling from a shared address does
# not lock it out, and its own five a minute still hold.
rule "login-per-visitor" {
  methods = ["POST"]
  paths   = ["/login"]
  # hosts limits a rule to some hosts (case, port, a trailing dot and
  # userinfo ignored); left out, the rule applies to every host. The host is
  # the absolute-form target's, or else Host, and the origin receives it
  # as matched; docs/host-and-path.md.
  # hosts   = ["login.example.com"]
  key          = ["visitor"]
  algorithm    = "gcra"
  limit        = 5
  period       = "1m"
  burst        = 5
  ip_ceiling   = 100
  exempt_known = ["logged-in"]
  sensitive    = true
  # Shed logins after API reads, before OTP verifies (load_shedding above).
  priority = "high"
  # The rule's own key budget in the memory store, its visitors and their
  # IPs' ceilings together. Sensitive: it never forgets a live counter to
  # make room, so with its budget full of them a new key gets 503
  # (on_store_error = "deny", the default) until one decays. Size it for the
  # clients one period sees under attack.
  max_keys = 100000
}

# A whole network (IPv4 /24, IPv6 /48) rotating addresses still shares one
# hourly budget. A known browser logging in to its own account is not held to
# it (exempt_known): 100 logins from the attacker's /24 lock out the fresh
# browsers in it for up to an hour, not the users who logged in before.
rule "login-per-network" {
  methods      = ["POST"]
  paths        = ["/login"]
  key          = ["ip"]
  ipv4_prefix  = 24
  ipv6_prefix  = 48
  algorithm    = "sliding_window"
  limit        = 100
  period       = "1h"
  exempt_known = ["logged-in"]
  sensitive    = true
  max_keys     = 20000
}

# A concurrency limit: at most 10 logins per client at the origin at once.
# Password hashing makes each login cost the origin 50-300 ms of CPU, so a
# client that opens many connections fills the origin's workers long before
# a rate limit fires (a rate limit counts arrivals, not how long each one
# holds a worker). A slot is taken when the request is forwarded and given
# back when the origin answers, on an upstream error, or when the client of
# a queued request hangs up. A request the origin does not answer within
# upstream_timeout (504) keeps its slot until its lease ends: the origin may
# still be working on it. With store "redis" the fleet shares the count,
# and a node that dies holds its slots only until their lease ends (default
# 30s; longer than upstream_timeout). The 11th is refused: 429,
# bare here (sensitive); on an ordinary route Retry-After: 1 and no
# RateLimit fields, since in flight is not a quota over a window.
# docs/policy.md, "Concurrency limits".
rule "login-in-flight-per-ip" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  algorithm = "concurrency"
  limit     = 10
  lease     = "30s"
  sensitive = true
  max_keys  = 20000
}

# Adaptive concurrency: the route's in-flight limit on this node, found from
# the origin's latency (Netflix's gradient: limit × RTT_noload ÷ RTT_actual
# + √limit per window of answers, within min..max; or method = "aimd").
# When the origin slows, the limit shrinks and the logins over it are shed
# with 503 at once rather than queued behind ones the origin is too slow
# for. Each node learns its own (no store); edge_adaptive_limit{rule} shows
# it. Shipped in dry-run, as a new limit should start: it sheds nothing and
# counts dry_run_deny where it would have. docs/policy.md, "Adaptive
# concurrency".
rule "login-adaptive" {
  methods   = ["POST"]
  paths     = ["/login"]
  algorithm = "concurrency"
  adaptive {
    method  = "gradient"
    min     = 10
    max     = 500
    initial = 50
  }
  dry_run = true
}

# Brute force on one account from one client: five failures in 15 minutes.
# count = "failures": a unit is charged before the origin answers and given
# back unless the answer is a failure (401, 403, or X-Edge-Outcome:
# failure), so parallel guesses cannot overshoot. A success clears the key,
# unless it may be another account's: a login naming several accounts, or an
# account spelled otherwise than it is counted ("Rene", counted as "rene"),
# only gives back its own charge (docs/policy.md, "reset_on_success").
rule "login-failures-account-client" {
  methods          = ["POST"]
  paths            = ["/login"]
  key              = ["account", "ip"]
  count            = "failures"
  reset_on_success = true
  algorithm        = "sliding_window"
  limit            = 5
  period           = "15m"
  sensitive        = true
  max_keys         = 100000
}

# Distributed guessing on one account from many addresses: 50 failures per
# 15 minutes from everyone together. A lockout must not be a weapon: a
# browser that logged in to the account successfully in the last 30 days,
# from any address, under the spelling it logs in with, is not held to it
# (known_visitors), everyone else is.
rule "login-failures-account" {
  methods        = ["POST"]
  paths          = ["/login"]
  key            = ["account"]
  count          = "failures"
  algorithm      = "sliding_window"
  limit          = 50
  period         = "15m"
  known_visitors = "30d"
  known_by       = ["visitor"]
  sensitive      = true
  max_keys       = 100000
}

# Credential stuffing: one client failing on many accounts. At most ten
# distinct failing accounts an hour per IP (only failures count, so a NAT
# crowd logging in successfully never trips it); tripping it bans the IP
# from every sensitive route for 15 minutes. The ban falls on what the
# attacker controls (ban_by = ["visitor"], the default with a visitor block):
# the IP's cookieless clients and the visitors whose failures it counted, not
# the other visitors behind the address; [] would ban the whole IP. A known
# browser's typo on its own account is not counted (exempt_known).
rule "login-accounts-per-ip" {
  methods        = ["POST"]
  paths          = ["/login"]
  key            = ["ip"]
  count          = "failures"
  count_distinct = "account"
  limit          = 10
  period         = "1h"
  sensitive      = true
  ban            = "15m"
  ban_scope      = "sensitive"
  ban_by         = ["visitor"]
  exempt_known   = ["logged-in"]
  max_keys       = 20000
}

# ---- Signup -----------------------------------------------------------------

rule "signup-per-network" {
  methods     = ["POST"]
  paths       = ["/signup"]
  key         = ["ip"]
  ipv4_prefix = 24
  ipv6_prefix = 48
  algorithm   = "sliding_window"
  limit       = 10
  period      = "1h"
  sensitive   = true
  max_keys    = 20000
}

# One inbox opens at most three accounts a day: account_aliases folds what an
# email provider delivers to one inbox (Gmail's dots and +tags,
# googlemail.com; +tags at Outlook, iCloud, Fastmail, Proton). Keyed on the
# email alone: a signup carries a username too, which may be anything, and
# an account keyed rule would give each new username a fresh budget.
rule "signup-per-email" {
  methods         = ["POST"]
  paths           = ["/signup"]
  key             = ["email"]
  account_aliases = true
  algorithm       = "sliding_window"
  limit           = 3
  period          = "1d"
  sensitive       = true
  max_keys        = 50000
}

# ---- OTP --------------------------------------------------------------------
# Where identities come from: each a list of sources (json:PATH, form:NAME,
# header:NAME, query:NAME, cookie:NAME). Body fields are read the way the
# origin's parser would; a field given twice with different values is
# invalid, never a guess. Every listed source that is present counts: when
# two give different values (a login body with a username and an email, an
# origin that logs people in by either), a rule keyed on the identity
# counts each value and refuses the request if any is over its limit.
# Phone numbers are normalised to E.164, so every way of writing one number
# counts in one bucket.
identity {
  phone = ["json:phone", "form:phone"]
  # Region of numbers written without a country code.
  phone_region = "US"
  # The challenge ID alone: an origin that finds a challenge by its ID gets
  # no fresh budget per phone number written beside it.
  otp_session = ["json:challenge_id", "form:challenge_id"]
  # The login identifier, normalised as an identity provider and a case-
  # and accent-insensitive database collation compare it (white space
  # trimmed, NFKC, case folding, accents folded: "ÀLICE@example.com" is
  # "alice@example.com"): every spelling of one account counts in one
  # bucket. A login origin may log in by username or by email, so both.
  account = ["json:username", "form:username", "json:email", "form:email"]
  # The email address alone, normalised as account is, for rules that mean
  # the inbox (signup-per-email).
  email = ["json:email", "form:email"]
  # What a request whose sources of one identity disagree gets: "count"
  # (the default: every value counted, as above) or "reject" (the identity
  # is invalid, 400 by the rule's invalid_identity); one mode for every
  # identity, or by identity. A signup form's username and email differ
  # legitimately, so account is not rejected here.
  # on_conflict = { otp_session = "reject" }
}

# Each text costs money: an exact sliding log per phone, three sends per
# 15 minutes (no rolling 15 minutes ever holds more than three). A number
# that does not parse is answered 400 (invalid_identity = "reject", the
# default) and charged to the per-client rules as an attempt.
rule "otp-send-per-phone" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["phone"]
  algorithm = "sliding_log"
  limit     = 3
  period    = "15m"
  sensitive = true
  # 50000 phones texted within 15 minutes; beyond that, a new phone gets 503
  # rather than any phone's log being forgotten.
  max_keys = 50000
}

rule "otp-send-per-client" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["ip"]
  algorithm = "sliding_window"
  limit     = 20
  period    = "1h"
  sensitive = true
  max_keys  = 50000
}

# SMS pumping walks through a numbering block: the E.164 number without its
# last three digits. A phone whose code was verified before is not held to
# its block's budget (exempt_known), only to its own (otp-send-per-phone):
# five sends to a victim's neighbours do not lock the victim out.
rule "otp-send-per-range" {
  methods      = ["POST"]
  paths        = ["/otp/send"]
  key          = ["phone_range"]
  algorithm    = "sliding_window"
  limit        = 5
  period       = "1h"
  exempt_known = ["verified-phone"]
  sensitive    = true
  max_keys     = 50000
}

# Premium-rate pumping goes abroad: only the countries we serve.
rule "otp-send-countries" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  action    = "deny"
  sensitive = true

  when {
    phone_country_not_in = ["US", "CA", "GB"]
  }
}

# Guessing codes: five attempts per code (otp_session: the challenge id
# alone, whatever phone is written beside it, in a JSON or a form body),
# every attempt counting, refused or not.
rule "otp-verify-per-session" {
  methods   = ["POST"]
  paths     = ["/otp/verify"]
  key       = ["otp_session"]
  algorithm = "sliding_log"
  limit     = 5
  period    = "15m"
  count     = "attempts"
  sensitive = true
  max_keys  = 50000
  # Shed last: a user holding a code must be able to use it.
  priority = "critical"
}

# A ceiling per phone across codes, so sending a new code does not buy more
# guesses than this. A successful verify (a success status, or the origin's
# X-Edge-Outcome: success) clears it.
rule "otp-verify-per-phone" {
  methods          = ["POST"]
  paths            = ["/otp/verify"]
  key              = ["phone"]
  algorithm        = "sliding_window"
  limit            = 15
  period           = "1h"
  count            = "attempts"
  reset_on_success = true
  # What counts as a success or a failure of the origin (defaults shown).
  success_status = [200, 201, 204]
  failure_status = [401, 403]
  sensitive      = true
  max_keys       = 50000
}

rule "otp-verify-per-client" {
  methods   = ["POST"]
  paths     = ["/otp/verify"]
  key       = ["ip"]
  algorithm = "sliding_window"
  limit     = 60
  period    = "1h"
  count     = "attempts"
  sensitive = true
  max_keys  = 50000
}

# ---- API --------------------------------------------------------------------
# Ordinary routes: an informative 429 with RateLimit, RateLimit-Policy and
# Retry-After, and allowed answers carry RateLimit too. They fail open.

# Per API key: 10 a second with bursts to 20. Requests without the header
# skip this rule (missing_identity defaults to "skip" on ordinary rules).
rule "api-per-key" {
  paths = ["/api/*"]
  key   = ["header:X-Api-Key"]
  # What a request without the header does: "skip" this rule (the default
  # on ordinary rules) or "reject" it with 400 (the default when sensitive).
  missing_identity = "skip"
  algorithm        = "gcra"
  limit            = 10
  period           = "1s"
  burst            = 20
  on_store_error   = "allow"
}

# A calendar quota per API key, layered over api-per-key's burst limit: the
# two rules match the same requests and each decides as any two rules do
# (the burst paces a key within the month; the quota caps its month however
# it is paced). 100000 calls a calendar month, the month as the customer's
# invoice counts it: from the 1st at 00:00 in Paris (23:00 UTC in winter,
# 22:00 in summer) to the next 1st; period = "day" (midnight to midnight)
# and "week" (Monday 00:00, ISO 8601) work alike. fixed_window only; DST
# makes a day 23 or 25 hours, and RateLimit's t counts to the next 1st
# (docs/policy.md, "Calendar quotas").
rule "api-monthly-per-key" {
  paths            = ["/api/*"]
  key              = ["header:X-Api-Key"]
  missing_identity = "skip"
  algorithm        = "fixed_window"
  limit            = 100000
  period           = "month"
  time_zone        = "Europe/Paris"
  max_keys         = 10000
}

# Per client: 60 a minute, bursts to 20.
rule "api-per-ip" {
  paths     = ["/api/*"]
  key       = ["ip"]
  algorithm = "token_bucket"
  limit     = 60
  period    = "1m"
  burst     = 20
  # API reads are shed first when the origin is saturated.
  priority = "low"
  # How its refusals are answered (ordinary rules only: a sensitive rule's
  # is always the bare 429, and these are errors there). retry_after_jitter
  # makes Retry-After and this rule's RateLimit t the true wait plus up to
  # 20% more, in whole seconds and never earlier, so clients refused at once
  # do not all return at once (here a refused client waits about a second,
  # under the one-second step, so 20% would add nothing: worth it on longer
  # waits). refusal_status (429 by default; 400-599 as NGINX's
  # limit_req_status) and refusal_body replace the 429 and its problem+json
  # body; the refusing rule with the longest wait answers (docs/policy.md,
  # "Refusals").
  # retry_after_jitter   = "20%"
  # refusal_status       = 503
  # refusal_body         = "{\"error\":\"slow down\"}\n"
  # refusal_content_type = "application/json"
}

# A tighter limit being tried in shadow mode: decided and counted as
# dry_run_deny in the metrics and logs, never refusing.
rule "api-per-ip-shadow" {
  paths     = ["/api/*"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 10
  period    = "1m"
  dry_run   = true
}

# Weighted costs: an export is worth many reads. Each is charged an estimate
# of 10 units up front (cost), and once the origin has answered, the real
# cost it names in X-Actual-Cost (settle_from; the demo origin's
# /api/export?cost=N names N) is settled on the key: the difference is
# charged, or refunded when the export was cheaper. A charge is never
# refused (the export was served); the balance may go below empty, and the
# client's next exports wait until it has recovered, as AWS bills
# variable-cost APIs. The origin's value is clamped to 0..max_cost, and
# X-Actual-Cost never reaches the client. A client can declare the cost
# itself instead, cost = "header:X-Export-Rows", clamped to 1..max_cost
# (a value that is not an integer costs max_cost).
rule "api-export-per-ip" {
  paths       = ["/api/export"]
  key         = ["ip"]
  algorithm   = "gcra"
  limit       = 100
  period      = "1h"
  cost        = 10
  max_cost    = 50
  settle_from = "X-Actual-Cost"
  max_keys    = 10000
}

# A queue, as NGINX's limit_req without nodelay: a leaky_bucket rule with
# queue = true does not forward a burst at once but holds each request the
# bucket admits early and releases it at the rule's rate, in arrival order
# (here one every 200 ms: a burst of 20 is spread over 3.8 s, the 21st
# refused). max_delay (default and at most burst ÷ rate, 4 s here) refuses
# at arrival a request that would wait longer, and gives its unit back. A
# held request whose client hangs up is dropped, never forwarded (its unit
# stays charged); a node holds at most 10000 requests in all, answering 503
# beyond (edge_queue_held, edge_queue_full_total). Smoothing for an origin
# that takes bursts badly; on a login it delays what the bucket lets through
# anyway, so it never admits more (docs/policy.md, "Queue").
# rule "api-search-queue" {
#   paths     = ["/api/search"]
#   key       = ["ip"]
#   algorithm = "leaky_bucket"
#   limit     = 5
#   period    = "1s"
#   burst     = 20
#   queue     = true
#   max_delay = "2s"
# }

# ---- Blocked outright ---------------------------------------------------------
# action = "deny" refuses every match (403 here; a bare 429 when sensitive)
# without counting: no key, limit or period. "log" would count and log
# without ever refusing.
rule "deny-internal" {
  paths  = ["/internal/*", "/.env", "/.git/*"]
  action = "deny"
}

# ---- Tests --------------------------------------------------------------------
# `edge test` runs these on a real edge with a simulated clock and origin, each
# from empty counters (docs/policy.md, "Test blocks"). Write one for every rule
# you change: it is the rule's specification, and CI runs it.

test "a login flood from one browser: five pass, the sixth is refused, 12 s later one more" {
  request {
    method  = "POST"
    path    = "/login"
    from    = "203.0.113.7"
    visitor = "alice"
    json    = { username = "alice", password = "letmein-demo" }
    repeat  = 5
    expect  = "allow"
  }
  request {
    method  = "POST"
    path    = "/login"
    from    = "203.0.113.7"
    visitor = "alice"
    json    = { username = "alice", password = "letmein-demo" }
    expect  = "deny"
    rule    = "login-per-visitor"
  }
  request {
    method  = "POST"
    path    = "/login"
    from    = "203.0.113.7"
    visitor = "bob"
    json    = { username = "bob", password = "letmein-demo" }
    expect  = "allow"
  }
  request {
    after   = "12s"
    method  = "POST"
    path    = "/login"
    from    = "203.0.113.7"
    visitor = "alice"
    json    = { username = "alice", password = "letmein-demo" }
    expect  = "allow"
  }
}

test "five failed logins lock one account for that client only, however it is spelled" {
  request {
    method        = "POST"
    path          = "/login"
    from          = "203.0.113.7"
    json          = { username = "Alice@Example.com", password = "wrong" }
    origin_status = 401
    repeat        = 5
    expect        = "allow"
  }
  request {
    method = "POST"
    path   = "/login"
    from   = "203.0.113.7"
    json   = { username = " alice@example.com", password = "letmein-demo" }
    expect = "deny"
    rule   = "login-failures-account-client"
  }
  request {
    method = "POST"
    path   = "/login"
    from   = "198.51.100.9"
    form   = { username = "ALICE@EXAMPLE.COM", password = "letmein-demo" }
    expect = "allow"
  }
}

test "a login naming one email under many usernames is held to five failures" {
  # An origin that logs people in by email acts on the email, whatever
  # username is written beside it: account counts both, so the victim's
  # five failures from this client are spent however the usernames rotate.
  request {
    method        = "POST"
    path          = "/login"
    from          = "203.0.113.40"
    json          = { username = "rotate01", email = "victim@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    after         = "13s"
    method        = "POST"
    path          = "/login"
    from          = "203.0.113.40"
    json          = { username = "rotate02", email = "victim@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    after         = "13s"
    method        = "POST"
    path          = "/login"
    from          = "203.0.113.40"
    form          = { username = "rotate03", email = "Victim@Example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    after         = "13s"
    method        = "POST"
    path          = "/login"
    from          = "203.0.113.40"
    json          = { username = "rotate04", email = "victim@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    after         = "13s"
    method        = "POST"
    path          = "/login"
    from          = "203.0.113.40"
    json          = { username = "rotate05", email = "VICTIM@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    after  = "13s"
    method = "POST"
    path   = "/login"
    from   = "203.0.113.40"
    json   = { username = "rotate06", email = "victim@example.com", password = "wrong" }
    expect = "deny"
    rule   = "login-failures-account-client"
  }
}

test "a signup's username and email may differ, and one inbox still opens three accounts a day" {
  request {
    method = "POST"
    path   = "/signup"
    from   = "203.0.113.50"
    json   = { username = "jane", email = "jane.roe@example.com" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/signup"
    from   = "198.51.100.50"
    json   = { username = "jane2", email = "jane.roe@example.com" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/signup"
    from   = "192.0.2.50"
    form   = { username = "jr", email = "Jane.Roe@Example.com" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/signup"
    from   = "192.0.2.51"
    json   = { username = "someone-new", email = "jane.roe@example.com" }
    expect = "deny"
    rule   = "signup-per-email"
  }
}

test "one inbox signs up three times a day, however its aliases are written" {
  request {
    method = "POST"
    path   = "/signup"
    from   = "203.0.113.7"
    json   = { email = "j.doe+1@gmail.com" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/signup"
    from   = "198.51.100.9"
    json   = { email = "JDoe@googlemail.com" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/signup"
    from   = "192.0.2.33"
    json   = { email = "jdoe+x@gmail.com" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/signup"
    from   = "192.0.2.34"
    json   = { email = "j.d.o.e@gmail.com" }
    expect = "deny"
    rule   = "signup-per-email"
  }
}

test "one phone gets three codes in 15 minutes, however it is written" {
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "203.0.113.7"
    json   = { phone = "+1 (202) 555-0100" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "198.51.100.9"
    form   = { phone = "202-555-0100" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "2001:db8:1:2::7"
    json   = { phone = "+12025550100" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.44"
    json   = { phone = "2025550100" }
    expect = "deny"
    rule   = "otp-send-per-phone"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.44"
    json   = { phone = "call me maybe" }
    expect = "reject"
  }
}

test "a phone that verified a code still gets codes when its block is full, within its own three; a phone no code was sent to does not" {
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "198.51.100.40"
    json   = { phone = "+1 202 555 0123" }
    expect = "allow"
  }
  # The origin answers 200: the code was right, the phone is known.
  request {
    method = "POST"
    path   = "/otp/verify"
    from   = "198.51.100.40"
    json   = { phone = "+12025550123", challenge_id = "c-1", code = "123456" }
    expect = "allow"
  }
  # 200 again (an origin that finds the challenge by its ID alone), but no
  # code was sent to the phone this verify names: it is not known.
  request {
    method = "POST"
    path   = "/otp/verify"
    from   = "192.0.2.60"
    json   = { phone = "+12025550177", challenge_id = "c-own", code = "654321" }
    expect = "allow"
  }
  # Two hours on, five sends to its neighbours fill the block's hour.
  request {
    after  = "2h"
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.50"
    json   = { phone = "+12025550100" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.50"
    json   = { phone = "+12025550101" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.50"
    json   = { phone = "+12025550102" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.50"
    json   = { phone = "+12025550103" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.50"
    json   = { phone = "+12025550104" }
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.50"
    json   = { phone = "+12025550105" }
    expect = "deny"
    rule   = "otp-send-per-range"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "198.51.100.40"
    json   = { phone = "+12025550123" }
    repeat = 3
    expect = "allow"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "198.51.100.40"
    json   = { phone = "+12025550123" }
    expect = "deny"
    rule   = "otp-send-per-phone"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "192.0.2.60"
    json   = { phone = "+12025550177" }
    expect = "deny"
    rule   = "otp-send-per-range"
  }
}

test "a ban falls on the visitors that failed and on the cookieless, not on the others behind the address" {
  request {
    method  = "POST"
    path    = "/login"
    from    = "198.51.100.60"
    visitor = "alice"
    json    = { username = "alice@example.com", password = "letmein-demo" }
    expect  = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-1"
    json          = { username = "victim01@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-1"
    json          = { username = "victim02@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-1"
    json          = { username = "victim03@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-1"
    json          = { username = "victim04@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-1"
    json          = { username = "victim05@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-2"
    json          = { username = "victim06@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-2"
    json          = { username = "victim07@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-2"
    json          = { username = "victim08@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-2"
    json          = { username = "victim09@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  request {
    method        = "POST"
    path          = "/login"
    from          = "198.51.100.60"
    visitor       = "stuffer-2"
    json          = { username = "victim10@example.com", password = "wrong" }
    origin_status = 401
    expect        = "allow"
  }
  # The eleventh account trips login-accounts-per-ip: the ban starts.
  request {
    method  = "POST"
    path    = "/login"
    from    = "198.51.100.60"
    visitor = "stuffer-3"
    json    = { username = "victim11@example.com", password = "wrong" }
    expect  = "deny"
    rule    = "login-accounts-per-ip"
  }
  request {
    after   = "5m"
    method  = "POST"
    path    = "/otp/send"
    from    = "198.51.100.60"
    visitor = "alice"
    json    = { phone = "+12025550147" }
    expect  = "allow"
  }
  request {
    method  = "POST"
    path    = "/login"
    from    = "198.51.100.60"
    visitor = "alice"
    json    = { username = "alice@example.com", password = "letmein-demo" }
    expect  = "allow"
  }
  request {
    method  = "POST"
    path    = "/signup"
    from    = "198.51.100.60"
    visitor = "stuffer-1"
    json    = { email = "mule@example.net" }
    expect  = "deny"
    rule    = "login-accounts-per-ip"
  }
  request {
    method = "POST"
    path   = "/otp/send"
    from   = "198.51.100.60"
    json   = { phone = "+12025550148" }
    expect = "deny"
    rule   = "login-accounts-per-ip"
  }
}

test "the shadow rule would refuse the eleventh API call a minute, and never does" {
  request {
    path   = "/api/items"
    from   = "198.51.100.20"
    repeat = 10
    expect = "allow"
  }
  request {
    path   = "/api/items"
    from   = "198.51.100.20"
    expect = "dry_run_deny"
    rule   = "api-per-ip-shadow"
  }
}

test "an export is charged what the origin says it cost, into debt, and refunded when cheaper" {
  # 100 units an hour (one back every 36 s), 10 charged up front; each of
  # these two really cost 50, so 40 more are charged after each.
  request {
    path           = "/api/export"
    from           = "198.51.100.30"
    origin_headers = { "X-Actual-Cost" = "50" }
    repeat         = 2
    expect         = "allow"
  }
  request {
    path   = "/api/export"
    from   = "198.51.100.30"
    expect = "deny"
    rule   = "api-export-per-ip"
  }
  # 6 minutes give back 10 units, the estimate; the real cost is 50 again:
  # 40 units of debt.
  request {
    after          = "6m"
    path           = "/api/export"
    from           = "198.51.100.30"
    origin_headers = { "X-Actual-Cost" = "50" }
    expect         = "allow"
  }
  # 24 minutes repay the debt only: the counter is full.
  request {
    after  = "24m"
    path   = "/api/export"
    from   = "198.51.100.30"
    expect = "deny"
    rule   = "api-export-per-ip"
  }
  # 6 more give back 10 units; this export cost 1, so 9 come back.
  request {
    after          = "6m"
    path           = "/api/export"
    from           = "198.51.100.30"
    origin_headers = { "X-Actual-Cost" = "1" }
    expect         = "allow"
  }
  # One unit more (36 s) and the refund makes 10.
  request {
    after  = "36s"
    path   = "/api/export"
    from   = "198.51.100.30"
    expect = "allow"
  }
  request {
    path   = "/api/export"
    from   = "198.51.100.30"
    expect = "deny"
    rule   = "api-export-per-ip"
  }
}

test "internal paths are refused in every spelling" {
  request {
    path   = "/internal/metrics"
    expect = "deny"
    rule   = "deny-internal"
  }
  request {
    path   = "//INTERNAL/./metrics"
    expect = "deny"
    rule   = "deny-internal"
  }
}
