// Package ban is the ban behaviour of rule { } blocks (docs/policy.md,
// "ban"): once a key trips a rule with ban = "15m", the key is refused for
// 15 minutes on every rule of the ban's scope, its own rule (ban_scope =
// "rule", the default) or every sensitive route ("sensitive"), whatever
// their own counters say, as Cloudflare's mitigation timeout and AWS WAF
// ATP's "block while over" do.
//
// A ban is a marker: a sliding_log counter of limit 1 whose period is the
// ban, written when the rule refuses the key and present for exactly the
// ban's time. Its key is the tripping key's with the ban flag, under the
// rule's ID, so a reload keeps it (rules are keyed by name), and its op is
// Sensitive, so the memory store never evicts it while it lasts: a ban is
// a counter that is still refusing; and a Marker, so the memory store
// keeps it in its rule's marker budget, where no flood of the rule's new
// keys can evict it (docs/memory-store.md, "Markers"). The check is a
// peek in the gate's precheck, the one store call before the request's
// main one (with known-visitor markers), and a banned request is refused
// before anything is counted; the ban is written in the after call.
//
// ban_by (docs/policy.md, "ban_by"): a ban keyed on an address would fall
// on everyone behind it, the real user with a valid visitor cookie beside
// the attacker. With ban_by = ["visitor"] (the default when the policy has
// a visitor { } block) a ban refuses only what the attacker controls: the
// address's cookieless clients (a shared bucket,
// rules.BucketCharacteristic: they cannot be told apart from the attacker)
// and the visitors that are guilty of it. A visitor is guilty when the
// rule counted one of its failures (count = "failures"; written in
// Settle's call) or, on a rule counting requests or attempts, refused it
// (written with the ban). A guilt marker is present for the rule's period
// and the ban after the act, so it covers every ban the act could have
// helped trip; it is keyed by the rule's key values and the ban_by values,
// under an ID and a key budget of its own (the rule's max_keys again),
// Sensitive as the ban is. A ban check is then the ban's marker and, for a
// visitor with a valid cookie, its guilt marker, both in the precheck.
// What the attacker gains back: its fresh visitors are not banned; each is
// a fresh visitor ID, at most mint_limit (+ mint_reserve) per mint_period
// per address, and held by every other rule (the banning rule's own
// counter first).
//
// It is a rules.Feature (builtin.Features lists it) whose three attributes
// compile, once the rule's other attributes are (Feature.RuleDone), to one
// Stage with a gate phase (the ban of its own scope: rules.Gater), a judge
// phase (the trip: rules.Judge), a part in a forgive (rules.Forgiver; behaviour/forgive)
// and in Policy.LongestKeyLifetime (rules.KeyKeeper); a ban of ban_scope =
// "sensitive" gates every sensitive request (rules.RequestGater), and a
// count = "failures" rule's guilt is written in Settle (rules.Settler).
// The request's checks live in one memo slot. Of reads a rule's ban.
package ban
