package redisstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

func TestCRC16(t *testing.T) {
	t.Parallel()
	// The check value of CRC-16/XMODEM, and Redis Cluster's own examples.
	tests := []struct {
		in   string
		want uint16
	}{
		{"123456789", 0x31c3},
		{"", 0},
	}
	for _, tt := range tests {
		if got := crc16([]byte(tt.in)); got != tt.want {
			t.Errorf("crc16(%q): got %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

func TestParseClusterURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url       string
		wantAddrs []string
		wantUser  string
		wantPass  string
		wantErr   bool
	}{
		{url: "h1:7001,h2:7002", wantAddrs: []string{"h1:7001", "h2:7002"}},
		{url: "127.0.0.1:7001/", wantAddrs: []string{"127.0.0.1:7001"}},
		{url: "127.0.0.1:7001/0", wantAddrs: []string{"127.0.0.1:7001"}},
		{url: "[::1]:7001,[::1]:7002", wantAddrs: []string{"[::1]:7001", "[::1]:7002"}},
		{url: "user:p%40ss@h1:7001,h2:7002", wantAddrs: []string{"h1:7001", "h2:7002"}, wantUser: "user", wantPass: "p@ss"},
		{url: "", wantErr: true},
		{url: "h1", wantErr: true},
		{url: "h1:0", wantErr: true},
		{url: "h1:port", wantErr: true},
		{url: ":7001", wantErr: true},
		{url: "h1:7001?read_timeout=1s", wantErr: true},
		{url: "h1:7001/1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			o, err := parseClusterURL(tt.url)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %+v, want an error", o.Addrs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(o.Addrs, " ") != strings.Join(tt.wantAddrs, " ") || o.Username != tt.wantUser || o.Password != tt.wantPass {
				t.Errorf("got %v %q %q, want %v %q %q", o.Addrs, o.Username, o.Password, tt.wantAddrs, tt.wantUser, tt.wantPass)
			}
		})
	}
}

// keysInSlots returns n Keys labelled label whose hash slots are pairwise
// distinct and, when distinct is given, whose masters differ by it.
func keysInSlots(label string, n int, ok func(slots []uint16, s uint16) bool) []rules.Key {
	var keys []rules.Key
	var slots []uint16
	for i := 0; len(keys) < n; i++ {
		var k rules.Key
		copy(k[:], label)
		k[20], k[21] = byte(i>>8), byte(i)
		s := slotOf(&k)
		if ok(slots, s) {
			keys = append(keys, k)
			slots = append(slots, s)
		}
	}
	return keys
}

func distinctSlots(slots []uint16, s uint16) bool {
	for _, x := range slots {
		if x == s {
			return false
		}
	}
	return true
}

// miniCluster returns a Store on a miniredis answering as a one-master
// cluster (every slot on one node: cross-slot calls pipelined on one
// connection), with the caller's clock.
func miniCluster(t *testing.T) (*Store, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	s := mustNew(t, Options{URL: "redis+cluster://" + m.Addr(), UseCallerClock: true, Timeout: time.Second})
	t.Cleanup(func() { s.Close() })
	return s, m
}

func take1(t *testing.T, s *Store, now time.Time, ops ...rules.Op) []rules.Result {
	t.Helper()
	res := make([]rules.Result, len(ops))
	if err := s.Take(context.Background(), now, ops, res); err != nil {
		t.Fatal(err)
	}
	return res
}

func peekLeft(t *testing.T, s *Store, now time.Time, op rules.Op) int64 {
	t.Helper()
	op.Kind, op.Cost = rules.OpPeek, 1
	return take1(t, s, now, op)[0].Remaining
}

// snapshot returns what Redis holds for op's key(s).
func snapshot(t *testing.T, ctx context.Context, c redis.Cmdable, s *Store, op rules.Op) string {
	t.Helper()
	name := s.keyName(&op.Key)
	v, err := c.Get(ctx, name).Result()
	if err == redis.Nil {
		v = "<none>"
	} else if err != nil {
		t.Fatal(err)
	}
	if op.Algorithm == rules.SlidingLog {
		zs, err := c.ZRangeWithScores(ctx, name+logSuffix, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zs {
			v += " " + z.Member.(string)
		}
	}
	return v
}

var algorithms = []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.LeakyBucket, rules.FixedWindow, rules.SlidingWindow, rules.SlidingLog}

// testCrossSlotUndo: a request taking from a roomy key and a full one in
// another slot is refused, and the roomy key is left exactly as it was (its
// stored bytes and a sliding_log's timestamps included), whatever it held
// before: nothing, units taken now, or a history whose oldest units the
// take drops from a sliding_log's window (the undo puts them back).
func testCrossSlotUndo(t *testing.T, s *Store, c redis.Cmdable, pick func([]uint16, uint16) bool, now time.Time) {
	ctx := context.Background()
	type unit struct {
		ago  time.Duration // before now
		cost int64
	}
	histories := []struct {
		name  string
		takes []unit
	}{
		{"fresh", nil},
		{"now", []unit{{0, 3}}},
		// At now-30s the window (60s) still holds the first two units;
		// at now they have left it, and the take drops them from a
		// sliding_log. The state is alive at now for every algorithm but
		// fixed_window, whose window has turned.
		{"history", []unit{{80 * time.Second, 1}, {70 * time.Second, 1}, {30 * time.Second, 6}}},
	}
	for _, alg := range algorithms {
		for hi, hist := range histories {
			t.Run(alg.String()+"/"+hist.name, func(t *testing.T) {
				if alg == rules.FixedWindow && hist.name == "history" {
					t.Skip("no state outlives a fixed window's end")
				}
				keys := keysInSlots(fmt.Sprintf("undo-%d-%d", alg, hi), 2, pick)
				roomy := rules.Op{Kind: rules.OpTake, Algorithm: alg, Key: keys[0], Limit: 10, Burst: 10, PeriodUS: 60_000_000, Cost: 1, Enforce: true}
				tight := roomy
				tight.Key, tight.Limit, tight.Burst, tight.Cost = keys[1], 2, 2, 2
				take1(t, s, now, tight) // full now
				for _, u := range hist.takes {
					o := roomy
					o.Cost = u.cost
					take1(t, s, now.Add(-u.ago), o)
				}
				before := snapshot(t, ctx, c, s, roomy)
				left := peekLeft(t, s, now, roomy)
				undos := s.Stats().Undos
				res := take1(t, s, now, roomy, tight)
				if !res[0].Allowed || res[1].Allowed {
					t.Fatalf("got %+v, want the roomy op allowed and the tight one refused", res)
				}
				if res[0].Remaining != left {
					t.Errorf("roomy op's Remaining: got %d, want %d (the state after the undo)", res[0].Remaining, left)
				}
				if got := s.Stats().Undos; got != undos+1 {
					t.Errorf("Stats().Undos: got %d, want %d", got, undos+1)
				}
				if after := snapshot(t, ctx, c, s, roomy); after != before {
					t.Errorf("roomy key after the refused request: got %q, want %q as before", after, before)
				}
				if got := peekLeft(t, s, now, roomy); got != left {
					t.Errorf("roomy key: got %d left, want %d", got, left)
				}
			})
		}
	}
}

func TestMiniClusterCrossSlotUndo(t *testing.T) {
	s, m := miniCluster(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	testCrossSlotUndo(t, s, c, distinctSlots, storetest.Base)
}

// TestMiniClusterUndoContended: when another request wrote the key between
// the take and its undo, the undo gives back only what is verifiably still
// the request's own, never more.
func TestMiniClusterUndoContended(t *testing.T) {
	base := storetest.Base.Add(100 * time.Millisecond)
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, _ := miniCluster(t)
			keys := keysInSlots("cont-"+alg.String(), 2, distinctSlots)
			// 10 per second: one unit refills in 100ms.
			roomy := rules.Op{Kind: rules.OpTake, Algorithm: alg, Key: keys[0], Limit: 10, Burst: 10, PeriodUS: 1_000_000, Cost: 1, Enforce: true}
			tight := roomy
			tight.Key, tight.Limit, tight.Burst, tight.Cost = keys[1], 1, 1, 1
			take1(t, s, base, tight)
			other := roomy
			other.Cost = 2
			s.beforeUndo = func() { take1(t, s, base, other) }
			res := take1(t, s, base, roomy, tight)
			s.beforeUndo = nil
			if !res[0].Allowed || res[1].Allowed {
				t.Fatalf("got %+v, want the roomy op allowed and the tight one refused", res)
			}
			// Only the other request's 2 units stay.
			if got := peekLeft(t, s, base, roomy); got != 8 {
				t.Errorf("got %d left, want 8: the undo gives back exactly the refused request's unit", got)
			}
			if res[0].Remaining != 8 {
				t.Errorf("Remaining reported: got %d, want 8", res[0].Remaining)
			}
		})
	}
}

// TestMiniClusterUndoDrained: in real time, a unit that has already
// refilled (its counter would be full without it) is not given back again
// when another request wrote the key meanwhile: an undo never over-admits.
func TestMiniClusterUndoDrained(t *testing.T) {
	base := storetest.Base.Add(100 * time.Millisecond)
	m := miniredis.RunT(t)
	s := mustNew(t, Options{URL: "redis+cluster://" + m.Addr(), Timeout: time.Second})
	defer s.Close()
	keys := keysInSlots("drained", 2, distinctSlots)
	// gcra, 10 per second: T = 100ms.
	roomy := rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: keys[0], Limit: 10, Burst: 10, PeriodUS: 1_000_000, Cost: 1, Enforce: true}
	tight := roomy
	tight.Key, tight.Limit, tight.Burst = keys[1], 1, 1
	m.SetTime(base)
	take1(t, s, base, tight)
	// The refused request's unit takes TAT to base+100ms; 150ms later it
	// has drained, and another request takes TAT to base+250ms.
	s.beforeUndo = func() {
		m.SetTime(base.Add(150 * time.Millisecond))
		take1(t, s, base, roomy)
	}
	take1(t, s, base, roomy, tight)
	s.beforeUndo = nil
	// Had the refused request never taken its unit, TAT would be
	// base+250ms too: 9 left at base+150ms.
	if got := peekLeft(t, s, base, roomy); got != 9 {
		t.Errorf("got %d left, want 9 (nothing given back: the unit had drained)", got)
	}
}

// TestMiniClusterNoScript: NOSCRIPT in a pipeline of several slots' calls
// reruns each by EVAL, counted once.
func TestMiniClusterNoScript(t *testing.T) {
	s, m := miniCluster(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	keys := keysInSlots("noscript", 3, distinctSlots)
	var ops []rules.Op
	for _, k := range keys {
		ops = append(ops, rules.Op{Kind: rules.OpTake, Algorithm: rules.FixedWindow, Key: k, Limit: 5, PeriodUS: 60_000_000, Cost: 1, Enforce: true})
	}
	for i := range 2 {
		if err := c.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		res := take1(t, s, storetest.Base, ops...)
		for j := range res {
			if !res[j].Allowed || res[j].Remaining != int64(4-i) {
				t.Fatalf("call %d op %d: got %+v, want allowed with %d left", i, j, res[j], 4-i)
			}
		}
	}
	if got := s.Stats().NoScript; got != 6 {
		t.Errorf("Stats().NoScript: got %d, want 6 (3 slots, twice)", got)
	}
}

// The tests below run against a real Redis Cluster whose nodes are listed
// in $EDGE_REDIS_CLUSTER_ADDRS (host:port,host:port,…), and skip without
// it; testdata/start-redis.sh starts a three-master one.

func clusterAddrs(t testing.TB) string {
	t.Helper()
	addrs := os.Getenv("EDGE_REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		t.Skip("EDGE_REDIS_CLUSTER_ADDRS is not set: no real Redis Cluster to test against (testdata/start-redis.sh starts one)")
	}
	return addrs
}

func clusterClient(t testing.TB, addrs string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), Protocol: 2})
	t.Cleanup(func() { c.Close() })
	return c
}

// masters returns a client per master of the cluster, and the address of
// the master serving each slot.
func masters(t *testing.T, c *redis.ClusterClient) ([]*redis.Client, func(slot uint16) string) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var cs []*redis.Client
	err := c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		cs = append(cs, m)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return cs, func(slot uint16) string {
		for _, r := range slots {
			if int(slot) >= r.Start && int(slot) <= r.End {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
}

func TestConformanceCluster(t *testing.T) {
	addrs := clusterAddrs(t)
	prefix := testPrefix("cluster")
	t.Run("caller_clock", func(t *testing.T) {
		storetest.RunWith(t, func(t *testing.T) rules.Store {
			return mustNew(t, Options{URL: "redis+cluster://" + addrs, Prefix: prefix, UseCallerClock: true, Timeout: conformanceBudget, DialTimeout: conformanceBudget})
		}, storetest.Options{PerShard: true})
	})
	ms, _ := masters(t, clusterClient(t, addrs))
	n := 0
	for _, m := range ms {
		n += checkKeys(t, context.Background(), m, prefix)
	}
	if n == 0 {
		t.Error("the suite left no keys: the scan looked in the wrong place")
	}
	t.Logf("%d keys, each with a TTL", n)
}

// TestClusterSlots: the store's slot of a key is the cluster's.
func TestClusterSlots(t *testing.T) {
	c := clusterClient(t, clusterAddrs(t))
	s := mustNew(t, Options{URL: "redis+cluster://" + clusterAddrs(t)})
	defer s.Close()
	for i := range 200 {
		var k rules.Key
		k[0], k[23] = byte(i), byte(i*7)
		want, err := c.ClusterKeySlot(context.Background(), s.keyName(&k)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := slotOf(&k); int64(got) != want {
			t.Fatalf("key %x: got slot %d, want %d (CLUSTER KEYSLOT)", k, got, want)
		}
	}
}

// TestClusterCrossSlotUndo: testCrossSlotUndo on keys of two different
// masters.
func TestClusterCrossSlotUndo(t *testing.T) {
	addrs := clusterAddrs(t)
	c := clusterClient(t, addrs)
	_, master := masters(t, c)
	s := mustNew(t, Options{URL: "redis+cluster://" + addrs, Prefix: testPrefix("undo"), UseCallerClock: true, Timeout: time.Second})
	defer s.Close()
	otherMaster := func(slots []uint16, slot uint16) bool {
		for _, x := range slots {
			if master(x) == master(slot) {
				return false
			}
		}
		return true
	}
	testCrossSlotUndo(t, s, c, otherMaster, storetest.Base.Add(time.Hour))
}

// TestClusterRoundTrips: a Take of ops in several slots sends one EVALSHA
// per slot, to the slots' masters, and no undo when it is allowed.
func TestClusterRoundTrips(t *testing.T) {
	addrs := clusterAddrs(t)
	ctx := context.Background()
	c := clusterClient(t, addrs)
	ms, _ := masters(t, c)
	s := mustNew(t, Options{URL: "redis+cluster://" + addrs, Prefix: testPrefix("trips"), Timeout: time.Second})
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	keys := keysInSlots("trips", 6, distinctSlots)
	var ops []rules.Op
	for _, k := range keys {
		ops = append(ops, rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: k, Limit: 1000, Burst: 1000, PeriodUS: 1_000_000, Cost: 1, Enforce: true})
	}
	take1(t, s, time.Now(), ops...) // warm every master's pool
	before := commandCalls(t, ctx, ms, "evalsha")
	const takes = 10
	for range takes {
		take1(t, s, time.Now(), ops...)
	}
	if got, want := commandCalls(t, ctx, ms, "evalsha")-before, int64(takes*len(keys)); got != want {
		t.Errorf("EVALSHA calls: got %d, want %d (one per slot per Take)", got, want)
	}
	if st := s.Stats(); st.Undos != 0 || st.CrossSlot != takes+1 {
		t.Errorf("Stats: got %+v, want %d cross-slot calls and no undo", st, takes+1)
	}
}

func TestClusterServerTimeSmoke(t *testing.T) {
	testServerTimeSmoke(t, "redis+cluster://"+clusterAddrs(t))
}

// TestClusterErrorBound checks the package doc's bound under contention,
// on the servers' clocks: 200 concurrent requests, each taking from a roomy
// key A (limit 50) and a tight key B (limit 20) on another master, all
// within one fixed hour. Never more than B's limit is admitted; once every
// call has returned, A and B are charged for exactly the admitted requests;
// the shortfall (requests refused while B had room, because A held units of
// requests B had refused that were not undone yet) is logged.
func TestClusterErrorBound(t *testing.T) {
	addrs := clusterAddrs(t)
	c := clusterClient(t, addrs)
	_, master := masters(t, c)
	s := mustNew(t, Options{URL: "redis+cluster://" + addrs, Prefix: testPrefix("bound"), Timeout: time.Second, PoolSize: 64})
	defer s.Close()
	keys := keysInSlots("bound", 2, func(slots []uint16, slot uint16) bool {
		return len(slots) == 0 || master(slots[0]) != master(slot)
	})
	const hour = 3600_000_000
	if now := time.Now().UnixMicro(); hour-now%hour < 60_000_000 {
		t.Skip("within a minute of the hour: the fixed window would roll over mid-test")
	}
	a := rules.Op{Kind: rules.OpTake, Algorithm: rules.FixedWindow, Key: keys[0], Limit: 50, PeriodUS: hour, Cost: 1, Enforce: true}
	b := a
	b.Key, b.Limit = keys[1], 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	start := make(chan struct{})
	for range 200 {
		wg.Go(func() {
			<-start
			ops := []rules.Op{a, b}
			res := make([]rules.Result, 2)
			if err := s.Take(context.Background(), time.Now(), ops, res); err != nil {
				t.Error(err)
				return
			}
			if !rules.Refused(ops, res) {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if admitted > 20 {
		t.Errorf("got %d requests admitted, want at most B's limit, 20", admitted)
	}
	if got := peekLeft(t, s, time.Now(), a); got != int64(50-admitted) {
		t.Errorf("A: got %d left, want %d (charged for the %d admitted only)", got, 50-admitted, admitted)
	}
	if got := peekLeft(t, s, time.Now(), b); got != int64(20-admitted) {
		t.Errorf("B: got %d left, want %d (charged for the %d admitted only)", got, 20-admitted, admitted)
	}
	st := s.Stats()
	t.Logf("%d of 200 admitted (B's limit 20: %d refused while B had room); %d undos, %d undo errors", admitted, 20-admitted, st.Undos, st.UndoErrors)
	if st.UndoErrors != 0 {
		t.Errorf("Stats().UndoErrors: got %d, want 0", st.UndoErrors)
	}
}
