package gateway

import (
	"cmp"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// The top refused keys per rule (GET /admin/refused, the admin page's
// recent refusals): who is being refused right now, as keyed hashes only
// (docs/operations.md, "Refused keys"). Memory is bounded whatever the
// traffic: per rule, refusedMinutes one-minute buckets of at most
// refusedPerBucket entries each, kept by the space-saving algorithm
// (Metwally, Agrawal and El Abbadi, "Efficient Computation of Frequent and
// Top-k Elements in Data Streams", ICDT 2005): an entry not in a full
// bucket replaces the one with the smallest count and inherits that count
// plus one, so a flood of distinct keys churns the tail while a key
// refused more often than the bucket's smallest count stays. A count is
// then an upper bound, over by at most the count it inherited (Err).
//
// An entry holds the client's address, not its keyed hash: the hash, an
// HMAC-SHA256, is the refusal path's dearest step after the store (about
// 3% of a refusal's CPU in bench/run.sh refusal's profile), and it is
// needed only when GET /admin/refused lists an entry, which hashes it
// then. The address never leaves the process: what the list shows is its
// hash, as before.

const (
	// refusedMinutes is how far back the list reaches, in minutes.
	refusedMinutes = 5
	// refusedPerBucket is the most keys one rule's minute keeps.
	refusedPerBucket = 32
)

// refusedEntry is one refused (key, client) pair of a bucket.
type refusedEntry struct {
	key        [15]byte // the counter key's keyed hash
	client     [16]byte // the client's address (netip.Addr.As16), hashed when listed
	count, err uint64   // refusals counted; how many of them it may have inherited
}

// refusedBucket is one rule's refusals in one minute.
type refusedBucket struct {
	minute  int64 // Unix minute; a bucket of another minute is stale
	n       int
	entries [refusedPerBucket]refusedEntry
}

// refusedRule is one rule's buckets, indexed by minute modulo
// refusedMinutes.
type refusedRule struct {
	mu      sync.Mutex
	buckets [refusedMinutes]refusedBucket
}

// refusedTracker holds every rule's refusals, by rule name (a reload keeps
// a rule's list as it keeps its counters). Its zero value is ready; it is
// safe for concurrent use.
type refusedTracker struct {
	mu    sync.RWMutex
	rules map[string]*refusedRule
}

// add counts one refusal of rule on key from client at now. It allocates
// only the first time a rule refuses.
func (t *refusedTracker) add(rule string, key [15]byte, client [16]byte, now time.Time) {
	t.mu.RLock()
	r := t.rules[rule]
	t.mu.RUnlock()
	if r == nil {
		t.mu.Lock()
		if t.rules == nil {
			t.rules = make(map[string]*refusedRule)
		}
		if r = t.rules[rule]; r == nil {
			r = &refusedRule{}
			t.rules[rule] = r
		}
		t.mu.Unlock()
	}
	minute := now.Unix() / 60
	r.mu.Lock()
	b := &r.buckets[minute%refusedMinutes]
	if b.minute != minute {
		b.minute, b.n = minute, 0
	}
	b.add(key, client)
	r.mu.Unlock()
}

func (b *refusedBucket) add(key [15]byte, client [16]byte) {
	least := 0
	for i := range b.n {
		e := &b.entries[i]
		if e.key == key && e.client == client {
			e.count++
			return
		}
		if e.count < b.entries[least].count {
			least = i
		}
	}
	if b.n < refusedPerBucket {
		b.entries[b.n] = refusedEntry{key: key, client: client, count: 1}
		b.n++
		return
	}
	e := &b.entries[least]
	*e = refusedEntry{key: key, client: client, count: e.count + 1, err: e.count}
}

// refusedTop is one entry of GET /admin/refused.
type refusedTop struct {
	Key    string `json:"key"`    // hex of the counter key's keyed hash (15 bytes), as the logs show it
	Client string `json:"client"` // hex of the client address's keyed hash (rules.Scratch.HashClient)
	Count  uint64 `json:"count"`  // refusals over the window (an upper bound, see refusedTracker)
}

// refusedRuleTop is one rule of GET /admin/refused.
type refusedRuleTop struct {
	Name string       `json:"name"`
	Top  []refusedTop `json:"top"`
}

// top returns, per rule with refusals over the last minutes (1 to
// refusedMinutes) before now, its most refused (key, client) pairs,
// most first, at most refusedPerBucket, rules by name. Rules with none
// in refusedMinutes are forgotten. hash is the clients' keyed hash
// (rules.Engine.HashClient).
func (t *refusedTracker) top(now time.Time, minutes int, hash func(netip.Addr) [15]byte) []refusedRuleTop {
	cur := now.Unix() / 60
	t.mu.Lock()
	names := make([]string, 0, len(t.rules))
	for name, r := range t.rules {
		r.mu.Lock()
		live := false
		for i := range r.buckets {
			live = live || cur-r.buckets[i].minute < refusedMinutes
		}
		r.mu.Unlock()
		if !live {
			delete(t.rules, name)
			continue
		}
		names = append(names, name)
	}
	rs := make([]*refusedRule, len(names))
	slices.Sort(names)
	for i, name := range names {
		rs[i] = t.rules[name]
	}
	t.mu.Unlock()

	type pair struct {
		key    [15]byte
		client [16]byte
	}
	out := []refusedRuleTop{}
	for i, r := range rs {
		sum := map[pair]uint64{}
		r.mu.Lock()
		for j := range r.buckets {
			b := &r.buckets[j]
			if age := cur - b.minute; age < 0 || age >= int64(minutes) {
				continue
			}
			for _, e := range b.entries[:b.n] {
				sum[pair{e.key, e.client}] += e.count
			}
		}
		r.mu.Unlock()
		if len(sum) == 0 {
			continue
		}
		top := make([]refusedTop, 0, len(sum))
		for p, n := range sum {
			h := hash(netip.AddrFrom16(p.client).Unmap())
			top = append(top, refusedTop{Key: hex.EncodeToString(p.key[:]), Client: hex.EncodeToString(h[:]), Count: n})
		}
		slices.SortFunc(top, func(a, b refusedTop) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Client, b.Client))
		})
		out = append(out, refusedRuleTop{Name: names[i], Top: top[:min(len(top), refusedPerBucket)]})
	}
	return out
}

// noteRefusal feeds observe's enforced refusal m of rs's request to the
// tracker: the key's hash (the counted key; a ban's refusal has none and
// is not listed) and the client's address. It allocates nothing once the rule has
// refused before.
func (s *Server) noteRefusal(rs *reqState, m *rules.Match) {
	if m.Op < 0 || m.Op >= len(rs.sc.Ops) {
		return
	}
	var key [15]byte
	k := rs.sc.Ops[m.Op].Key
	copy(key[:], k[9:])
	s.refused.add(m.Rule.Name, key, rs.req.Client.As16(), rs.now)
}

// clientAttr is the log attribute "client": the hex of the client
// address's keyed hash, so an operator can follow one client through the
// logs without the log holding its address.
func clientAttr(rs *reqState) slog.Attr {
	h := rs.sc.HashClient(rs.req.Client)
	return slog.String("client", hex.EncodeToString(h[:]))
}
