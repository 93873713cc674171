package rules

// KeyBudgetUse is one key budget's use in a store that bounds each rule's
// keys (the memory store, docs/memory-store.md), for metrics: the gateway
// exports a store's budgets when it has a Budgets() []KeyBudgetUse method.
type KeyBudgetUse struct {
	// ID is the rule ID its keys start with (Rule.ID, Budget.ID); zero
	// for the shared budget.
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
