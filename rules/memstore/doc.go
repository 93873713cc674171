// Package memstore is the in-memory rules.Store: the default for a single
// node, and the reference the Redis store is compared with.
//
// The algorithms are counter.Check and counter.Settle, so memstore decides bit
// for bit as every other store. Keys live in shards, each a map behind its
// own mutex, picked by a seeded maphash of the Key, so that concurrent
// requests on different keys rarely contend and an attacker cannot aim
// keys at one shard.
//
// # Key budgets
//
// Keys are bounded per rule, as NGINX gives each limit_req_zone its own
// memory, so that a flood of new keys on one rule never evicts another
// rule's counters (issue 9's bypass 3, docs/memory-store.md). An op's
// budget is its rule's: the ops whose Key starts with the same rule ID
// (Key[0:8], a hash of the rule's name) and that carry rules.Op.MaxKeys
// share one budget of that many keys, across all shards; the newest op's
// MaxKeys is the bound, so a reload's new max_keys applies from the rule's
// next new key, and a budget follows its rule's name across reloads. Ops
// with MaxKeys 0 share one budget of Options.MaxKeys (the Engine never
// sends them). Within a budget, when a new key finds it full:
//
//   - Decayed state goes first. An entry past its expiry (the TTL
//     counter.Settle gave it: its state has decayed to empty, and
//     rules.TestTTLMeansFresh proves such a state decides as a missing key)
//     costs nothing to forget. Each shard's part of a budget keeps an expiry
//     heap, so a decayed entry is found without a scan; the other shards'
//     parts are searched too (the ones the call holds in place, the others
//     when their lock is free), and a search that finds nothing records the
//     budget's earliest expiry, so that the next full-budget key searches
//     again only once something may have decayed. An expired key that an op
//     reads is reused in place, as the fresh state it equals: it keeps its
//     room through the call, and gives it back if the op leaves it empty.
//   - A sensitive op (rules.Op.Sensitive) never evicts live state. Its new
//     key reserves its room while the call decides (all-or-nothing holds:
//     a refused call gives it back); with the budget full of live state, the
//     op is answered by its OnError with StoreError set, as a failing
//     store's would be: FailOpen allows, FailClosed refuses (the Engine
//     answers 503), and FailLocal refuses, this being the local store. It
//     is counted as the budget's Full. A peek, refund or reset stores
//     nothing and is decided as the missing key it is.
//   - Another op evicts its budget's least recently used live key (in the
//     new key's shard, else the next shard that has one: the recency order
//     is per shard), counted as the budget's Evictions.
//   - A call never evicts a key it touches, so it never loses its own
//     writes (issue 9: a shard holding fewer entries than the call's ops
//     lost them): when every candidate is the call's own, the budget holds
//     one key more until its next new key, which then evicts two.
//
// # Markers
//
// An op with rules.Op.Marker (a ban, a known visitor, a forgive's
// exemption: a key whose presence is the point) counts in its rule's
// marker budget, beside the rule's counters: as many keys again
// (MaxKeys; Options.MaxKeys for a marker op without one), its own parts,
// recency lists and expiry heaps. A marker op never evicts, as a
// sensitive op never does, and nothing evicts a marker: the only op that
// makes room in a marker budget is a marker's, so a flood of the rule's
// new keys, sensitive or not, never reaches one, and a marker never takes
// a counter's room. A new marker whose budget is full of live markers is
// answered by its OnError with StoreError set, not stored, and counted as
// the budget's Full. Budgets reports marker budgets with Markers set.
//
// # Network shares
//
// An op with rules.Op.NetworkKeys and a Network (the Engine's keyed hash
// of the client's network, an IPv6 /48 or IPv4 /24 by default) makes a new
// key in its budget only while its network holds fewer than NetworkKeys
// of the budget's keys; otherwise the op is refused with NetworkFull set,
// nothing is stored, and the call's other ops consume nothing (a refusal
// like any other), counted as the budget's NetworkFull. Keys that exist
// are never refused by it, whoever reads them. The check comes before the
// budget's: a network over its share is refused whether or not the budget
// has room. A key counts to the network that made it (a decayed key read
// again in place is made again, by its reader's network) until it
// decays, is evicted or is emptied, each of which gives the room back.
// A network at its share has its decayed keys reclaimed (in every shard,
// the held ones in place and the others if their lock is free) before a
// new key of it is refused, and a refusal's RetryAfter is the time until
// the earliest of its keys decays; a budget keeps per network slot a time
// before which none of its keys decays (512 KiB, made when one of its
// networks first reaches its share), so that search, which reads every
// key of the budget, runs once per key that decays while the network is
// at its share (claimSlotOrReclaim).
//
// Each budget counts keys per network in a table of 65,536 atomic
// counters (256 KiB, made on its first such key): a network's slot is its
// Network folded into 1..65,535, and the entry keeps its slot in 2 bytes
// of its 96, so the count is exact, lock-free, and costs a new key one
// compare-and-swap. Two networks whose hashes fold to one slot share a
// count: a given network shares with a given other one with probability
// 1/65,535, and the hash is keyed, so nobody can aim at a slot.
//
// Budgets reports each budget's keys, bound and counters, for metrics.
//
// # Expiry
//
// Every entry carries the TTL counter.Settle returns. An entry read after its
// expiry is fresh, and a background sweeper, stopped by Close, drops
// expired entries, walking the expiry heaps, so that idle keys give their
// memory back even when no new key needs the room.
//
// # Concurrency and cost
//
// A Store is safe for concurrent use. One Take is atomic across all of its
// ops: it locks every shard its keys fall in, in ascending shard order (so
// two calls never deadlock), decides every op, applies the all-or-nothing
// contract, then unlocks; another shard's lock is only ever tried, never
// waited for. Take allocates nothing for keys that already exist (the
// caller owns ops and res), nor for a new key that evicts one in its shard
// (it takes the evicted entry) or is refused by a full budget; creating a
// key otherwise costs one allocation (and its log's array, for
// sliding_log).
// An entry holds its state compact (96 B on amd64, about 189 B a tracked
// GCRA key with its map and heap slots at a million keys, 173 B at ten
// million): a log's and a distinct set's arrays sit behind one pointer,
// allocated once per entry and kept through expiry and reuse as a spare;
// its budget's part is named by its place in the shard, and what the call
// holding the shard touched by a flag that the call clears as it unlocks.
// An existing key's take touches neither its budget nor its expiry heap: a
// heap key is allowed to lag behind an expiry that moved later, and is
// brought up to date when it reaches the heap's top.
package memstore
