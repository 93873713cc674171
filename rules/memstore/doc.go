// Package memstore is the in-memory rules.Store: the default for a single
// node, and the reference the Redis store is compared with.
//
// It owns a bounded key space split into shards, each a least-recently-used
// cache (golang-lru's simplelru) behind its own mutex, picked by a seeded
// maphash of the Key, so that concurrent requests on different keys rarely
// contend and an attacker cannot aim keys at one shard. A full shard evicts
// its least recently used key. The algorithms are rules.Check and
// rules.Settle, so memstore decides bit for bit as every other store.
//
// Every entry carries the TTL rules.Settle returns (the time its state takes
// to decay to empty). An entry read after its expiry is fresh, and a
// background sweeper, stopped by Close, drops expired entries so that idle
// keys give their memory back before eviction would.
//
// Concurrency: a Store is safe for concurrent use. One Take is atomic across
// all of its ops: it locks every shard its keys fall in, in ascending shard
// order (so two calls never deadlock), decides every op, applies the
// all-or-nothing contract, then unlocks. Take allocates nothing for keys
// that already exist (the caller owns ops and res); creating a key costs
// two small allocations.
package memstore
