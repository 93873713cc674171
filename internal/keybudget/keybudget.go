// Package keybudget shares the memory store's key budget out among the
// counters of a policy (docs/memory-store.md): every counting rule that
// sets no max_keys, and every feature budget of a share (the visitor mint
// budget, a known block's), gets an equal share of the store's max_keys,
// ⌈max_keys ÷ n⌉ each for n of them, so that together they hold about
// max_keys keys and a flood on one cannot evict another's; a rule's own
// max_keys, a fixed budget and the budgets sized after another's come on
// top. A budget under PerNetwork also bounds what one client network may
// make of it (internal/netshare).
//
// rules' Compiler makes the policy's budgets (rules.Compiler.AddKeyBudget,
// rules.Budget is Budget) and calls Split and Bound once every rule is
// compiled; a Budget is immutable after that and safe for concurrent use.
// Use is what a store that bounds keys reports of each budget, for
// metrics.
package keybudget

import "github.com/edge-gateway/edge/internal/netshare"

// Budget is the memory-store key budget of counters that belong to a
// feature rather than a rule (the visitor mint budget, a known block's
// markers): keys whose first eight bytes are ID hold at most MaxKeys keys.
type Budget struct {
	ID [8]byte
	// Name labels the budget's metrics ("(visitor mint)").
	Name string
	// MaxKeys is the budget's share of the store's max_keys, or the size
	// its owner gave it, set by Split.
	MaxKeys int

	size   size
	like   *Budget // the budget whose MaxKeys this one's is (Like)
	follow *int    // the rule's MaxKeys this one's is (Following)
	// perNetwork: one client network may make networkKeys of it at most
	// (PerNetwork; 0: no bound), set by Bound.
	perNetwork  bool
	networkKeys int32
}

// size is how a Budget's MaxKeys is set.
type size uint8

const (
	shared    size = iota // a share of the store's max_keys
	fixed                 // its owner's
	alike                 // another budget's
	following             // a rule's
)

// Shared returns a budget of a share of the store's max_keys, for
// counters whose keys start with id (from rules.BudgetID); name labels
// its metrics.
func Shared(id [8]byte, name string) *Budget { return &Budget{ID: id, Name: name} }

// Fixed returns a budget of maxKeys keys (1 to rules.MaxKeysLimit), its
// owner's size (a known block's max_keys), not a share of the store's.
func Fixed(id [8]byte, name string, maxKeys int) *Budget {
	return &Budget{ID: id, Name: name, MaxKeys: maxKeys, size: fixed}
}

// Like returns a budget as large as other, not a share more of the
// store's: counters that come with other's (the mint budget's
// fingerprints) without crowding them out.
func Like(id [8]byte, name string, other *Budget) *Budget {
	return &Budget{ID: id, Name: name, size: alike, like: other}
}

// Following returns a budget as large as a rule's, whose MaxKeys is at
// maxKeys (&Rule.MaxKeys, read once Split has set it), not a share more
// of the store's: keys that come with the rule's counters (ban_by's guilt
// markers) without crowding them out.
func Following(id [8]byte, name string, maxKeys *int) *Budget {
	return &Budget{ID: id, Name: name, size: following, follow: maxKeys}
}

// PerNetwork bounds what one client network may make of b: the store's
// network_share of its MaxKeys (NetworkKeys, set by Bound), so that one
// network cannot fill a budget every client needs (a known block's
// markers: an attacker logging in from many visitors of one network would
// leave no one else knowable). It returns b.
func (b *Budget) PerNetwork() *Budget {
	b.perNetwork = true
	return b
}

// NetworkKeys returns the most keys of b one client network may make in
// the memory store (the store's network_share of MaxKeys, rounded down, at
// least 1, for a budget under PerNetwork), or 0 for no bound.
func (b *Budget) NetworkKeys() int { return int(b.networkKeys) }

// Split shares maxKeys, the store's max_keys, out: each of rules (the
// MaxKeys of the counting rules that set no max_keys) and each Shared
// budget gets ⌈maxKeys ÷ n⌉ keys, at least 1, for the n of them; then a
// Following budget gets its rule's, and a Like budget its other's.
func Split(maxKeys int, rules []*int, budgets []*Budget) {
	n := len(rules)
	for _, b := range budgets {
		if b.size == shared {
			n++
		}
	}
	share := max((maxKeys+max(n, 1)-1)/max(n, 1), 1)
	for _, mk := range rules {
		*mk = share
	}
	for _, b := range budgets {
		switch b.size {
		case shared:
			b.MaxKeys = share
		case following:
			b.MaxKeys = *b.follow // a rule's ban_by markers (behaviour/ban)
		}
	}
	for _, b := range budgets {
		if b.size == alike {
			b.MaxKeys = b.like.MaxKeys
		}
	}
}

// Bound sets the network bound of each budget under PerNetwork, once Split
// has sized it: netshare.Bound of its MaxKeys at ppm, the store's
// network_share in parts per million (0: no bound, a Redis store). It
// reports whether any budget has one.
func Bound(budgets []*Budget, ppm int) (bounded bool) {
	for _, b := range budgets {
		b.networkKeys = 0
		if b.perNetwork {
			b.networkKeys = int32(netshare.Bound(b.MaxKeys, ppm, 1))
		}
		bounded = bounded || b.networkKeys > 0
	}
	return bounded
}

// Use is one key budget's use in a store that bounds each rule's keys
// (the memory store, docs/memory-store.md), for metrics: the gateway
// exports a store's budgets when it has a Budgets() []Use method.
type Use struct {
	// ID is the rule ID its keys start with (rules.Rule.ID, Budget.ID);
	// zero for the shared budget.
	ID [8]byte
	// Shared marks the shared budget: ops with MaxKeys 0 (the store's
	// own bound).
	Shared bool
	// Markers marks a rule's marker budget (Op.Marker): its bans, known
	// visitors and exemptions, beside the rule's counters (the budget with
	// the same ID and Markers false). It never evicts; Full counts the
	// markers it could not take.
	Markers bool
	// Keys is the number of keys held, expired ones not yet swept or
	// reclaimed included; MaxKeys the bound (the newest op's MaxKeys).
	Keys, MaxKeys int64
	// Evictions counts live keys evicted to make room for a new key of a
	// non-sensitive op, since the store was made.
	Evictions uint64
	// Full counts new keys of sensitive or marker ops answered by their
	// OnError because the budget was full of live state, since the store
	// was made.
	Full uint64
	// NetworkFull counts new keys refused because their network held its
	// share of the budget (Op.NetworkKeys), since the store was made.
	NetworkFull uint64
}
