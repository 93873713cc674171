// Package forgive is the exemption a forgive grants (docs/operations.md,
// "Forgive"): the locked-out customer on the phone with support. The
// operator's forgive (POST /admin/forgive, edge forgive: Forgive, which
// the gateway reaches through Extension) clears the key it names
// (KeyFromText) of its counter and its ban and, given a
// duration, exempts the key from the rule for exactly that long: while the
// exemption lasts the rule does not hold the key to its limit. The key's op
// is decided without refusing or charging, as a known visitor's is
// (rules.Scratch.TakeOut, behaviour/known), and the rule's ban does not
// refuse it. The exemption ends by itself; nothing has to remember to end
// it.
//
// An exemption is a marker in the store, written by the forgive in a call
// of its own after the one that clears it (a store judges the ops of one
// call against the state before it, so the latest forgive's duration
// holds, not the sum of them). Its key is the counter key with a flag
// flipped in its tag byte (exemptKey), and it is a GCRA of 1 ms emission
// interval and a day's burst (exemptOp): an add of n units puts its
// theoretical arrival time n ms ahead, and a peek of the whole burst is
// refused exactly while that time is still ahead, so the marker is present
// for the forgive's duration whatever the duration, and decays (and
// leaves the store, whose TTL is the decay) when it ends. It cannot be a
// sliding_log counter as a ban is: a log's entry is present for the period
// of the op that reads it, and each forgive has its own duration. It is a
// Marker, so the memory store keeps it in its rule's marker budget and
// never evicts it while it lasts.
//
// The marker is checked in the gate's precheck, the one store call before
// the request's main one, with bans and known-visitor markers, and only
// for rules that have a live exemption, so a request to a rule nobody
// forgave costs nothing more. Which rules have one is this node's record
// of its own forgives, and of the fleet's (ExemptFrom): node
// state kept by the Engine across reloads (rules.Engine.Kept). With a
// shared store, the counter a forgive clears is cleared for the fleet,
// and the exemption holds on the node that was asked and on those that
// read the fleet's record.
//
// It is a rules.Feature (builtin.Features lists it) with no attribute:
// once every rule is compiled (Feature.PolicyDone) it sets the policy's
// rules.Exemptions, whose gate runs before every stage's, so that a
// forgiven key is taken out of its rule before its ban could refuse it.
// The request's checks live in one memo slot. An Exemptions value is
// immutable and safe for concurrent use; the record is copy on write.
package forgive
