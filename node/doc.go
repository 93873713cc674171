// Package node is the node's own configuration: the policy's edge { }
// block (listeners, the origin and upstream_tls, the public listener's
// tls, ja4_header, decide_listen, connection budgets and read deadlines,
// the client address) and its store { } block (the counter store, its
// key budgets and its Redis connection), as a rules.Feature (Feature,
// registered in builtin.Features) whose blocks are decoded before every
// other (rules.BlockType.First).
//
// What the rules read of these blocks (the client address, the prefixes
// that group clients, path_case, dry_run, upstream_timeout,
// decide_listen, the memory store's key budgets) goes to the policy
// itself (rules.Node, through rules.Compiler.SetNode); edge { }'s
// load_shedding is kept as written (Config.LoadShedding) for
// behaviour/shed, which compiles it once the rules are compiled. The
// rest is the policy's Config, which Of returns, for the gateway and
// cmd/edge: the addresses to listen on and proxy to, the certificates
// read and checked at compile, the store to open.
//
// A Config is immutable once the policy is loaded, and safe for
// concurrent use; LoadListenerTLS reads a certificate pair again for the
// certificate reload.
package node
