// Package ext is the gateway's extension seam: the HTTP half of a feature,
// what the gateway does for it around the Engine's decision (the other
// half, its blocks, characteristics and conditions, is a rules.Feature).
// nat mints and verifies visitor cookies through it, botscore tells the
// origin its score, ja4 fingerprints the TLS listener's connections; the
// gateway names none of them, and builtin.Extensions lists those of this
// build (docs/architecture.md, "Extension points").
//
// An Extension is one value per Server (it may keep state across reloads,
// such as a random secret made once). At New and at every reload the
// gateway calls its Open with the policy: the Instance it returns (nil when
// the policy does not use the feature) serves that policy, and the hook
// interfaces it implements (Decider, Forwarder, Settler, Responder,
// DecideAnswerer, Explainer) are found once, then, not per request. A hook
// runs on the request's goroutine, with the request's pooled Request: it
// must allocate nothing once warm, and keep nothing of the Request past
// its return.
//
// The request's phases, in order, on the proxy listener:
//
//  1. Decider.BeforeDecide: after rules.Scratch.Begin, before the Engine
//     decides (or, for POST /admin/explain, explains) the request: read a
//     cookie or a header into the request (rules.Request) or a memo slot.
//  2. Forwarder.OnForward: the request is let through; its header to the
//     origin is sanitized (the client's X-Edge-* are gone): add the
//     feature's headers.
//  3. Settler.OnOrigin: the origin answered; say whether the feature needs
//     Engine.Settle's call although the decision does not.
//  4. Responder.OnResponse: after Settle, on the client's response.
//
// On the decision-only listener, DecideAnswerer.OnDecideAllow runs instead
// of 2 to 4, on the 200 that lets the described request through. An
// Extension may also wrap the TLS listener's connections (ConnWrapper),
// count (Counted), read an identity an operator forgives (Forgiver) and
// carry out the forgive (Pardoner).
package ext
