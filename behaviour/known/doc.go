// Package known is the known callers of rule { } blocks: no defence may be
// aimed at the people it protects (docs/policy.md, "known_visitors" and
// "known").
//
// Known visitors: a lockout that cannot be a weapon. An account-wide
// failure rule (key = ["account"], count = "failures") would let anyone
// lock the real user out by failing on purpose. With known_visitors =
// "30d" and known_by = ["visitor"], a success records a marker for the
// account and the visitor that logged in; for the next 30 days that
// visitor is not held to the rule (it is decided, never refuses and is
// never charged), while everyone else is. A marker is a sliding_log
// counter of limit 1 whose period is the known_visitors time: present (a
// peek is refused) for exactly that long after the last success. Its key
// hashes the rule's key values and the known_by values together, each
// naming the caller exactly (an account as it was sent, a visitor by its
// ID: rules.CallerCharacteristic), under the rule's ID with the marker
// flag, so no store sees the account or the visitor.
//
// Known callers: a known "NAME" { } block names the requests whose success
// makes their caller known (a login, an OTP verify), what recognises the
// caller (by: a visitor and the account it logged in to, a phone whose
// code was verified) and for how long after its last success (for). A
// rule whose exempt_known names the block does not hold a known caller to
// what it shares with others: the request is decided, never refused nor
// charged by the rule (a visitor rule: by its ip_ceiling, the budget of
// every visitor behind the address; the visitor's own counter still
// holds), and the rule's ban does not refuse it. Whatever the caller's own
// key counts (its visitor, its phone, its account from its address) holds
// as before.
//
// Recorded on one route, checked on another: a verify makes the phone
// known to the send route's range rule. A block's marker is a sliding_log
// counter of limit 1 whose period is the block's for, under the block's
// own ID (a hash of its name, apart from every rule's), keyed by the keyed
// hash of the by values, each naming the caller exactly, so no store sees
// a phone, an account or a visitor ID. Its checks ride in the precheck
// call (the one before the main call, with bans); its writes in Settle's
// call, after a success, and only when the markers the block requires
// (requires = ["code-sent"]) were live for the request's values in the
// precheck: a verify makes known only a phone a code was sent to. A value
// that is a bucket many clients share (a visitor's cookieless bucket,
// rules.BucketCharacteristic) recognises no one and is never recorded by
// a block (known_visitors names an address's cookieless bucket by the
// address, as ever). Markers are Sensitive ops in a budget of their own,
// so the memory store never evicts a live one; a full budget records no
// new caller (the rules apply to it as before) and forgets none.
//
// It is a rules.Feature (builtin.Features lists it): the known block is
// its BlockType (decoded after every other block: its by reads them),
// known_visitors, known_by and exempt_known its rule attributes, compiled
// together into one Stage per rule, a rules.Gater. In the gate phase the
// stage queues its markers' checks in the precheck call (Scratch.PreOp)
// and, once they are answered, takes the match of a known caller out of
// its rule (Scratch.TakeOut), before bans refuse; the feature's request
// hook (a rules.RequestGater and RequestSettler) checks what the blocks a
// request matches require and writes their markers, and known_visitors',
// after a success. Per-request state lives in one memo slot. Forgive's
// exemptions (behaviour/forgive) take a match out of its rule the same way,
// before any stage admits.
package known
