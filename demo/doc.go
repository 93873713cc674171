// Package demo is the built-in demo origin: a small HTTP application the
// edge sits in front of in the README's first command (`go run ./cmd/edge
// -demo`, which serves it on the policy's upstream address) and that
// `edge demo-origin -listen HOST:PORT` serves alone. It is for demos and
// tests only: the gateway's end-to-end tests and the load tool's scenarios
// and attack suite (loadtest/, docs/attacks.md) run it behind a real edge
// node. Never put it in front of users.
//
// Its routes, matched the way permissive web frameworks match them (on the
// normalised path, ignoring case and a trailing slash, honouring
// X-HTTP-Method-Override, X-HTTP-Method and X-Method-Override), so that a
// limit the edge failed to canonicalise would be bypassed against it:
//
//	POST /login        200 {"ok":true} for the password "letmein-demo", any username; 401 otherwise
//	POST /signup       200 {"ok":true}
//	POST /otp/send     opens an OTP challenge for "phone": 200 {"challenge_id":…,"demo_code":…}
//	                   (being a demo, it tells the 6-digit code; 400 without a phone); the
//	                   challenge lives 10 minutes
//	POST /otp/verify   200 once for a matching "challenge_id", "phone" and "code"; 401 otherwise
//	                   (a wrong code leaves the challenge: limiting guesses is the edge's job)
//	/api/export        200 {"ok":true} with X-Actual-Cost: the cost query parameter as sent
//	                   (10 without one), a variable-cost call for settle_from
//	/api/…, /trace/…   200 {"ok":true}, any method
//	anything else      404
//
// Bodies are read as JSON when the Content-Type says json (or, without
// one, when the body starts with "{"), as multipart when it says
// multipart/form-data, and as a urlencoded form otherwise; a malformed one
// is a 400. This is one permissive reading among several;
// docs/body-identities.md says how the edge reads body identities so that
// no origin's reading escapes a limit.
//
// It records, per raw request path as it arrived on the wire, how many
// requests reached it, and keeps the last one (Origin.Hits, Origin.Last), so
// a test can check what the edge forwarded. The same records are served as
// test hooks, uncounted, only to clients that reach the origin directly (a
// request carrying X-Forwarded-For, which the edge always sets, gets 404):
//
//	GET  /__origin/hits    the counts per raw path, as a JSON object
//	GET  /__origin/last    the last counted request (a Request), or 404 before any
//	POST /__origin/reset   forgets the counts and the last request
//
// and the controls that let a test decide when the origin answers, so that
// nothing rests on timing (hold.go; the same as Go methods of Origin):
//
//	POST   /__origin/hold?path=/login   hold requests to the path (every non-control path
//	                                    without one) until released: Origin.Hold
//	POST   /__origin/release?n=K        release the K oldest held, in arrival order (all
//	                                    without n): {"released":K}, Origin.Release
//	DELETE /__origin/hold               stop holding, release every held request: Origin.StopHolding
//	GET    /__origin/inflight           {"in_flight":N,"peak":M,"held":H,"by_path":{…}}: Origin.InFlight
//	POST   /__origin/inflight/reset     the peak starts again from what is in flight: Origin.ResetPeak
//	POST   /__origin/latency?path=/login&ms=200
//	                                    answer the path (every path without one) that much
//	                                    later, on a timer; ms=0 removes it: Origin.SetLatency
//
// Origin.WaitHeld waits for a number of held requests without polling. At
// most 10,000 requests are held at once (one more is a 503 at once), and a
// shutdown releases them all.
//
// Everything it keeps is bounded, since it listens on a socket: 100,000
// pending OTP challenges (the oldest dropped first), 10,000 distinct hit
// paths (later new paths are answered but not counted), 1 MiB request
// bodies. An Origin is safe for concurrent use. The package imports nothing
// from the edge: gateway/ is what it is put behind, never what it uses.
package demo
