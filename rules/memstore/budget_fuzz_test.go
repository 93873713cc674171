package memstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// budgetModel is a naive model of what the package doc's "Key budgets"
// says the store keeps: a map of keys, each budget's count, a clock of
// last use for recency, and linear scans for every choice the store makes
// with lists, heaps and hints. The algorithms are rules.Check and
// rules.Settle, as in the store: what it checks is which state is kept,
// evicted or refused. Its one freedom: which decayed entry it forgets
// (each reads as fresh, the clock never stepping back); a decayed entry
// that an op reads is read as fresh in place and keeps its room for the
// call. After each call it takes the store's choice (syncDecayed).
//
// Network shares: each budget counts the keys each network made
// (rules.Op.Network, NetworkKeys), an entry remembering its maker; a
// decayed entry read in place by an op that stores is the new key of that
// op's network.
type budgetModel struct {
	shardOf func(*rules.Key) uint16
	shards  int
	keys    map[rules.Key]*modelEntry
	count   [4]int64 // per budget: keys held + rooms reserved by the call
	max     [4]int64
	evicted [4]uint64
	full    [4]uint64
	nets    [4]map[uint32]int32 // per budget and network: keys held + claims of the call
	netFull [4]uint64
	clock   int64
}

type modelEntry struct {
	st        rules.State
	expiresAt int64
	budget    int
	net       uint32 // the network that made it; 0 none
	used      int64  // the model's clock at the last touch or insert
	touched   bool   // by the current call
}

// claim counts a new key of op to its network, unless the network holds
// its share once its decayed keys that the call has not touched are
// forgotten (then counted as netFull, and wait is the time until the
// earliest of its keys decays: 0 when it holds none).
func (m *budgetModel) claim(b int, op *rules.Op, nowUS int64) (ok bool, wait time.Duration) {
	if m.nets[b] == nil {
		m.nets[b] = map[uint32]int32{}
	}
	if m.nets[b][op.Network] >= op.NetworkKeys {
		for k, e := range m.keys {
			if e.budget == b && e.net == op.Network && !e.touched && nowUS >= e.expiresAt {
				m.remove(k)
			}
		}
	}
	if m.nets[b][op.Network] >= op.NetworkKeys {
		m.netFull[b]++
		earliest := int64(-1)
		for _, e := range m.keys {
			if e.budget == b && e.net == op.Network && (earliest < 0 || e.expiresAt < earliest) {
				earliest = e.expiresAt
			}
		}
		if earliest > nowUS {
			wait = rules.DurationUS(earliest - nowUS)
		}
		return false, wait
	}
	m.nets[b][op.Network]++
	return true, 0
}

// budgetIndex is op's budget in the model: 0 the shared one (MaxKeys 0),
// 3 rule 1's markers, else the rule's (Key[1]).
func budgetIndex(op *rules.Op) int {
	switch {
	case op.Marker:
		return 3
	case op.MaxKeys == 0:
		return 0
	}
	return int(op.Key[1])
}

// storeBudgetIndex is b's index in the model.
func storeBudgetIndex(b *Budget) int {
	switch {
	case b.Markers:
		return 3
	case b.Shared:
		return 0
	}
	return int(b.ID[1])
}

func (m *budgetModel) take(nowUS int64, ops []rules.Op) []rules.Result {
	for _, e := range m.keys {
		e.touched = false
	}
	want := make([]rules.Result, len(ops))
	reserved := make([]bool, len(ops))
	renewedOp := make([]bool, len(ops)) // a decayed entry read in place
	var fresh rules.State
	for i := range ops {
		op := &ops[i]
		b := budgetIndex(op)
		if e := m.keys[op.Key]; e != nil {
			renewed := nowUS >= e.expiresAt
			if renewed {
				e.st = rules.State{} // decayed: fresh, in place, keeping its room
			}
			m.clock++
			e.touched, e.used = true, m.clock
			want[i] = rules.Check(&e.st, nowUS, op)
			if renewed && stores(op) {
				if e.net != 0 {
					m.nets[e.budget][e.net]--
					e.net = 0
				}
				if claims(op) {
					if ok, wait := m.claim(b, op, nowUS); ok {
						e.net = op.Network
					} else {
						want[i] = netFullAnswer(op, wait)
					}
				}
			}
			renewedOp[i] = renewed
			continue
		}
		want[i] = rules.Check(&fresh, nowUS, op)
		if claims(op) {
			if ok, wait := m.claim(b, op, nowUS); !ok {
				want[i] = netFullAnswer(op, wait)
				continue
			}
		}
		if !reserves(op) {
			continue
		}
		for {
			if m.count[b] < m.max[b] {
				m.count[b]++
				reserved[i] = true
				break
			}
			if !m.forgetDecayed(b, nowUS) {
				want[i] = fullAnswer(op)
				m.full[b]++
				if claims(op) {
					m.nets[b][op.Network]--
				}
				break
			}
		}
	}
	refused := rules.Refused(ops, want)
	for i := range ops {
		op := &ops[i]
		b := budgetIndex(op)
		if e := m.keys[op.Key]; e != nil {
			if want[i].NetworkFull {
				m.remove(op.Key)
				continue
			}
			if refused && renewedOp[i] && attemptsOnly(op) {
				m.remove(op.Key) // an attempt in a refused call makes no new key
				settleFresh(nowUS, op, &want[i])
				continue
			}
			if ttl := rules.Settle(&e.st, nowUS, op, refused, &want[i]); ttl > 0 {
				e.expiresAt = nowUS + ttl
			} else {
				m.remove(op.Key)
			}
			continue
		}
		if want[i].StoreError || want[i].NetworkFull {
			continue
		}
		if refused && attemptsOnly(op) {
			if reserved[i] {
				m.count[b]--
			}
			if claims(op) {
				m.nets[b][op.Network]--
			}
			settleFresh(nowUS, op, &want[i])
			continue
		}
		var st rules.State
		ttl := rules.Settle(&st, nowUS, op, refused, &want[i])
		if ttl == 0 {
			if reserved[i] {
				m.count[b]--
			}
			if claims(op) {
				m.nets[b][op.Network]--
			}
			continue
		}
		var net uint32
		if claims(op) {
			net = op.Network
		}
		if !reserved[i] {
			m.count[b]++
			for k := 0; k < maxEvictionsPerKey && m.count[b] > m.max[b]; k++ {
				if !m.evict(b, nowUS, m.shardOf(&op.Key)) {
					break
				}
			}
		}
		m.clock++
		m.keys[op.Key] = &modelEntry{st: st, expiresAt: nowUS + ttl, budget: b, net: net, used: m.clock, touched: true}
	}
	return want
}

// sweep drops every decayed entry.
func (m *budgetModel) sweep(nowUS int64) {
	for k, e := range m.keys {
		if nowUS >= e.expiresAt {
			m.remove(k)
		}
	}
}

func (m *budgetModel) remove(k rules.Key) {
	e := m.keys[k]
	m.count[e.budget]--
	if e.net != 0 {
		m.nets[e.budget][e.net]--
	}
	delete(m.keys, k)
}

// forgetDecayed drops one decayed entry of budget b that the call has not
// touched, and reports whether there was one.
func (m *budgetModel) forgetDecayed(b int, nowUS int64) bool {
	for k, e := range m.keys {
		if e.budget == b && !e.touched && nowUS >= e.expiresAt {
			m.remove(k)
			return true
		}
	}
	return false
}

// evict makes room in b for a new key of a non-sensitive op in shard x:
// decayed state anywhere, else the least recently used untouched entry of
// shard x, else of the next shard that has one.
func (m *budgetModel) evict(b int, nowUS int64, x uint16) bool {
	if m.forgetDecayed(b, nowUS) {
		return true
	}
	for j := range m.shards {
		y := (int(x) + j) % m.shards
		var victim *rules.Key
		var used int64
		for k, e := range m.keys {
			if e.budget == b && !e.touched && int(m.shardOf(&k)) == y && (victim == nil || e.used < used) {
				k := k
				victim, used = &k, e.used
			}
		}
		if victim != nil {
			m.remove(*victim)
			m.evicted[b]++
			return true
		}
	}
	return false
}

// FuzzBudgets drives the store and the naive model with the same calls
// and requires identical results, key counts and budget counters. Input:
// shards, the three budgets' bounds, the rules' sensitivity and
// on_store_error, their algorithms and network shares, then per call one
// byte of elapsed time and one of op count, cost, the ops' networks and
// whether the sweeper runs first, and one byte per op (rule, key, kind). Rule 0 counts in the shared budget
// (MaxKeys 0), rules 1 and 2 in their own; "rule" 3 is rule 1's markers
// (Marker, rule 1's MaxKeys: a budget of their own that never evicts).
func FuzzBudgets(f *testing.F) {
	f.Add([]byte{1, 2, 2, 2, 0b111, 0, 1, 5, 10, 1, 0x05, 20, 2, 0x06, 0x0a, 30, 3, 0x09, 0x0d, 0x11, 200, 1, 0x05})
	f.Add([]byte{8, 1, 1, 3, 0b010_110, 5, 5, 3, 0, 3, 0x02, 0x06, 0x0a, 0, 3, 0x0e, 0x12, 0x16, 50, 2, 0x82, 0xa6, 255, 3, 0x06, 0x0a, 0x0e})
	f.Add([]byte{2, 3, 1, 1, 0b001_100, 1, 3, 4, 1, 2, 0x01, 0x05, 1, 2, 0x09, 0x0d, 1, 2, 0x11, 0x15, 1, 2, 0x19, 0x1d, 255, 1, 0x01})
	// Network shares of 1 and 2 keys: calls of two or three new keys from
	// networks 1, 2 and 3, and 0 (none).
	f.Add([]byte{0, 3, 3, 3, 0b000_010, 0x40, 0x81, 0x43, 1, 0x03, 0x05, 0x09, 0x0d, 1, 0x13, 0x11, 0x15, 0x19, 1, 0x23, 0x06, 0x0a, 0x0e, 100, 0x03, 0x05, 0x09, 0x0d, 1, 0x33, 0x07, 0x0b, 0x0f})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 8 {
			return
		}
		shards := []int{1, 2, 8, 1}[in[0]&3]
		maxKeys := [3]int64{int64(in[1]&3) + 1, int64(in[2]&3) + 1, int64(in[3]&3) + 1}
		s, err := New(Options{Shards: shards, MaxKeys: int(maxKeys[0]), SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		m := &budgetModel{shardOf: s.shardOf, shards: shards, keys: map[rules.Key]*modelEntry{}, max: [4]int64{maxKeys[0], maxKeys[1], maxKeys[2], maxKeys[1]}}
		var templates [4]rules.Op
		for r := range 3 {
			alg := []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.LeakyBucket, rules.FixedWindow, rules.SlidingWindow, rules.SlidingLog}[in[5+r]%6]
			limit := int64(in[5+r]>>3&1) + 2
			templates[r] = rules.Op{
				Algorithm: alg, Limit: limit, Burst: limit, PeriodUS: limit * 1000 * (int64(in[5+r]>>4&3) + 1),
				Enforce: true, Sensitive: in[4]>>r&1 != 0, NetworkKeys: int32(in[5+r] >> 6),
				OnError: []rules.StoreErrorMode{rules.FailClosed, rules.FailOpen, rules.FailLocal, rules.FailClosed}[in[4]>>(3+r)&1+in[4]>>6&2],
			}
			if r > 0 {
				templates[r].MaxKeys = int32(maxKeys[r])
			}
		}
		templates[3] = templates[1]
		templates[3].Marker = true
		kinds := []rules.OpKind{rules.OpTake, rules.OpTake, rules.OpTake, rules.OpTake, rules.OpPeek, rules.OpAdd, rules.OpRefund, rules.OpReset}
		nowUS := storetest.Base.UnixMicro()
		script := in[8:]
		for call := 0; len(script) >= 2; call++ {
			nowUS += int64(script[0]) * 40
			n, cost, nets := int(script[1]&3), int64(script[1]>>2&3), uint32(script[1]>>4&7)
			if script[1]&0x80 != 0 {
				s.sweep(nowUS) // drops every decayed entry, as the model's sweep
				m.sweep(nowUS)
			}
			script = script[2:]
			var ops []rules.Op
			seen := map[rules.Key]bool{}
			for ; n > 0 && len(script) > 0; n-- {
				v := script[0]
				script = script[1:]
				r := int(v & 3)
				op := templates[r]
				op.Key = rules.Key{'b', byte(r), 'u', 'd', 'g', 'e', 't', 0, byte(v >> 2 & 7 % 5)}
				if op.Marker {
					op.Key[1], op.Key[8] = 1, 8+op.Key[8] // rule 1's marker keys
				}
				op.Kind = kinds[v>>5]
				op.Network = (nets + uint32(len(ops))) % 4 // 0: none
				op.Cost = max(cost, 1)
				if op.Kind == rules.OpAdd || op.Kind == rules.OpRefund {
					op.Cost = cost
				}
				if !seen[op.Key] {
					seen[op.Key] = true
					ops = append(ops, op)
				}
			}
			if len(ops) == 0 {
				continue
			}
			got := make([]rules.Result, len(ops))
			if err := s.Take(context.Background(), time.UnixMicro(nowUS), ops, got); err != nil {
				t.Fatal(err)
			}
			want := m.take(nowUS, ops)
			for i := range ops {
				if g, w := got[i], want[i]; g.NetworkFull && w.NetworkFull && g.RetryAfter > 0 && g.RetryAfter <= w.RetryAfter && g.ResetAfter == g.RetryAfter {
					// The store's wait for a network at its share may be
					// its hint, a lower bound of the model's exact
					// earliest decay (a key extended since its search).
					got[i] = want[i]
				}
				if got[i] != want[i] {
					t.Fatalf("call %d at +%dµs, op %d (kind %d rule %d key %d sensitive %v): got %+v, want %+v",
						call, nowUS-storetest.Base.UnixMicro(), i, ops[i].Kind, ops[i].Key[1], ops[i].Key[8], ops[i].Sensitive, got[i], want[i])
				}
			}
			checkEntries(t, s)
			// Decayed entries are invisible, and which of them each side
			// forgot is free: the live keys, their expiries, and each
			// budget's counters must be the same.
			if got, want := liveKeys(s, nowUS), m.liveKeys(nowUS); !slices.Equal(got, want) {
				t.Fatalf("call %d: got live keys %v, the model %v", call, got, want)
			}
			for _, b := range s.Budgets() {
				i := storeBudgetIndex(&b)
				if b.Keys < int64(len(m.live(i, nowUS))) || b.Evictions != m.evicted[i] || b.Full != m.full[i] || b.NetworkFull != m.netFull[i] {
					t.Fatalf("call %d: budget %d: got %+v, the model %d live keys, %d evictions, %d full, %d network full", call, i, b, len(m.live(i, nowUS)), m.evicted[i], m.full[i], m.netFull[i])
				}
			}
			m.syncDecayed(s, nowUS)
			for _, b := range s.Budgets() {
				i := storeBudgetIndex(&b)
				if b.Keys != m.count[i] {
					t.Fatalf("call %d: budget %d counts %d keys, holds %d", call, i, b.Keys, m.count[i])
				}
			}
			for _, b := range s.budgetList() {
				i := storeBudgetIndex(&Budget{ID: b.id, Shared: b.shared, Markers: b.markers})
				for n := uint32(1); n < 4; n++ {
					got := int32(0)
					if c := b.nets.Load(); c != nil {
						got = c[netSlot(n)].Load()
					}
					if want := m.nets[i][n]; got != want {
						t.Fatalf("call %d: budget %d counts %d keys of network %d, the model %d", call, i, got, n, want)
					}
				}
			}
		}
	})
}

// syncDecayed makes the model's decayed keys the store's. Which decayed
// entry a full budget forgets is free, but not invisible later: a decayed
// entry still held is read as fresh in place, keeping its room, where a
// forgotten one comes back as a new key, which evicts from its own shard
// when the budget is full. So after each call the model keeps the decayed
// keys the store kept (each side forgot as many, so the counts hold).
func (m *budgetModel) syncDecayed(s *Store, nowUS int64) {
	held := map[rules.Key]bool{}
	for x := range s.shards {
		for k, e := range s.shards[x].m {
			if nowUS < e.expiresAt {
				continue
			}
			held[k] = true
			if m.keys[k] == nil {
				b := 0
				switch {
				case e.part != 0 && s.shards[x].partAt(e).b.markers:
					b = 3
				case e.part != 0:
					b = int(k[1])
				}
				me := &modelEntry{expiresAt: e.expiresAt, budget: b}
				if e.net != 0 {
					me.net = uint32(e.net) - 1 // netSlot's inverse for the fuzz's networks 1 to 3
					if m.nets[b] == nil {
						m.nets[b] = map[uint32]int32{}
					}
					m.nets[b][me.net]++
				}
				m.keys[k] = me
				m.count[b]++
			}
		}
	}
	for k, e := range m.keys {
		if nowUS >= e.expiresAt && !held[k] {
			m.remove(k)
		}
	}
}

// liveKeys lists the store's keys that have not decayed at nowUS, as
// rule/key(µs to expiry), sorted.
func liveKeys(s *Store, nowUS int64) []string {
	var out []string
	for i := range s.shards {
		for k, e := range s.shards[i].m {
			if nowUS < e.expiresAt {
				out = append(out, fmt.Sprintf("%d/%d(%d)", k[1], k[8], e.expiresAt-nowUS))
			}
		}
	}
	slices.Sort(out)
	return out
}

// liveKeys lists the model's keys that have not decayed at nowUS, as the
// store's liveKeys does.
func (m *budgetModel) liveKeys(nowUS int64) []string {
	var out []string
	for k, e := range m.keys {
		if nowUS < e.expiresAt {
			out = append(out, fmt.Sprintf("%d/%d(%d)", k[1], k[8], e.expiresAt-nowUS))
		}
	}
	slices.Sort(out)
	return out
}

// live returns budget b's keys that have not decayed at nowUS.
func (m *budgetModel) live(b int, nowUS int64) []rules.Key {
	var out []rules.Key
	for k, e := range m.keys {
		if e.budget == b && nowUS < e.expiresAt {
			out = append(out, k)
		}
	}
	return out
}
