# The differential harness's policy (internal/differential, docs/differential.md).
#
# Every rule has limit 1 over a day and a key that ends in the send's nonce
# (header:X-Differential-Send): a send's corpus request spends each
# identity's one allowance, and a probe of a value afterwards is refused
# (429) exactly when the corpus request counted that value. The nonce keeps
# sends apart, so the outcome of one never depends on another.
#
# Each rule matches the corpus routes (/v/*) and its own probe route
# (/probe/RULE), which no other rule matches: a probe's 429 names the rule
# that counted the value. missing_identity is "skip" so that a request
# naming only some identities still reaches the origin (the shipped policy's
# sensitive rules would answer 400, which only hides what the origin reads);
# invalid_identity is "reject", the edge's default.
#
# The identity block reads the body as the shipped policies.hcl does, and
# the query too (an origin that merges the two reads it there).

edge {
  listen         = "127.0.0.1:0"
  admin_listen   = "127.0.0.1:0"
  upstream       = "http://127.0.0.1:9"
  max_body_bytes = 65536
  path_case      = "sensitive"
}

store "memory" {
  max_keys = 1000000
}

identity {
  phone        = ["json:phone", "form:phone", "query:phone"]
  phone_region = "US"
  otp_session  = ["json:challenge_id", "form:challenge_id", "query:challenge_id"]
  # The login identifier, a username or an email, as the shipped policy's:
  # every source present counts (a login may name both, and differ).
  account = ["json:username", "form:username", "query:username", "json:email", "form:email", "query:email"]
  email   = ["json:email", "form:email", "query:email"]
}

# The phone number, as the OTP send rules key it.
rule "phone" {
  paths            = ["/v/*", "/probe/phone"]
  key              = ["phone", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

# The OTP session (the challenge id alone), as the OTP verify rules key it.
rule "session" {
  paths            = ["/v/*", "/probe/session"]
  key              = ["otp_session", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

# The username, from each place a login form may put it.
rule "username-json" {
  paths            = ["/v/*", "/probe/username-json"]
  key              = ["json:username", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

rule "username-form" {
  paths            = ["/v/*", "/probe/username-form"]
  key              = ["form:username", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

rule "username-query" {
  paths            = ["/v/*", "/probe/username-query"]
  key              = ["query:username", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

# The account, as the login rules key it (the shipped identity, and the
# query too): one identity across json:, form: and query:, of the username
# and the email, normalised (trim, NFKC, case and accent folding), so every
# spelling of one account is one counter; a request naming two accounts
# counts both.
rule "account" {
  paths            = ["/v/*", "/probe/account"]
  key              = ["account", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

# The email, from each place a signup form may put it.
rule "email-json" {
  paths            = ["/v/*", "/probe/email-json"]
  key              = ["json:email", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

rule "email-form" {
  paths            = ["/v/*", "/probe/email-form"]
  key              = ["form:email", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

rule "email-query" {
  paths            = ["/v/*", "/probe/email-query"]
  key              = ["query:email", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

# The email identity, as signup-per-email keys it: json:, form: and query:,
# normalised as the account is.
rule "email" {
  paths            = ["/v/*", "/probe/email"]
  key              = ["email", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

# The challenge id alone, from each place.
rule "challenge-json" {
  paths            = ["/v/*", "/probe/challenge-json"]
  key              = ["json:challenge_id", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

rule "challenge-form" {
  paths            = ["/v/*", "/probe/challenge-form"]
  key              = ["form:challenge_id", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}

rule "challenge-query" {
  paths            = ["/v/*", "/probe/challenge-query"]
  key              = ["query:challenge_id", "header:X-Differential-Send"]
  algorithm        = "sliding_log"
  limit            = 1
  period           = "24h"
  sensitive        = true
  missing_identity = "skip"
}
