// Package nat gives visitors behind a shared address (carrier-grade NAT, an
// office, a campus) their own identity, so a rule keyed on `visitor` can
// limit one of them without limiting all of them.
//
// The edge mints a visitor ID (128 random bits) and hands it to the browser
// in a cookie it signs with HMAC-SHA256, as Cloudflare's "IP with NAT
// support" does. A [Signer] mints the cookie value ([Signer.Mint]), writes
// the Set-Cookie header ([Signer.AppendSetCookie]), checks a returned cookie
// ([Signer.Verify]), and derives the keyed hash the origin receives in
// X-Edge-Visitor ([Signer.AppendVisitorHash]). [Feature] is the visitor
// block, characteristic and condition; [Extension], the gateway's part
// (package gateway/ext): it verifies the request's cookie before the
// decision, mints within the mint budget and sets the cookie on the answer.
//
// # Secrets and rotation
//
// The `visitor { secret_env }` variable holds comma-separated secrets
// ([ParseSecrets]). The first signs; every one verifies. To rotate, put a new
// secret first and keep the old one second; after max_age, remove the old
// one. Nobody is logged out along the way. A cookie whose secret has left the
// list counts as no cookie. Without the variable, a node signs with
// [RandomSecret] and should warn that a fleet needs a shared secret: each
// node would otherwise refuse the others' cookies.
//
// # What counts as no cookie
//
// Verify accepts only a value it could have minted, byte for byte (the
// base64 decoding is strict and the length exact), whose MAC verifies under
// one of the secrets, and whose issue time is neither more than [ClockSkew]
// in the future nor MaxAge or more in the past. Tampered, truncated,
// overlong, retired-secret, expired and future cookies are all simply
// "false": the caller treats the request as cookieless and does not tell
// the client why.
//
// # Concurrency
//
// A Signer is immutable once [NewSigner] returns it and safe for concurrent
// use by any number of goroutines; a policy reload builds a new one. Its
// HMAC states live in a sync.Pool, so concurrent requests never share one.
// The package has no mutable package-level state, and no function retains
// the byte slices it is given.
//
// # Allocation
//
// Verify does not allocate and takes well under a microsecond (a
// benchmark and an AllocsPerRun test hold it to that). Mint,
// AppendSetCookie and AppendVisitorHash allocate only when dst must grow.
package nat
