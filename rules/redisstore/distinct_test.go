package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// setSnapshot returns what Redis holds for a distinct op's key: the
// string and every member of its sorted set with its score.
func setSnapshot(t *testing.T, c redis.Cmdable, s *Store, op rules.Op) string {
	t.Helper()
	ctx := context.Background()
	name := s.keyName(&op.Key)
	v, err := c.Get(ctx, name).Result()
	if err == redis.Nil {
		v = "<none>"
	} else if err != nil {
		t.Fatal(err)
	}
	zs, err := c.ZRangeWithScores(ctx, name+logSuffix, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range zs {
		v += fmt.Sprintf(" %s@%.0f", z.Member, z.Score)
	}
	return v
}

// testDistinctUndo: a request counting a value on a roomy distinct key
// and refused by a full one in another slot leaves the roomy key exactly
// as it was (its string and its members' scores), whether the value was
// new (the undo removes it, and puts back the expired members the take
// dropped) or known (the undo puts its old score back).
func testDistinctUndo(t *testing.T, s *Store, c redis.Cmdable, pick func([]uint16, uint16) bool, now time.Time) {
	type seen struct {
		ago    time.Duration // before now
		member uint64
	}
	tests := []struct {
		name    string
		history []seen
		member  uint64 // the refused request's value
	}{
		{"fresh", nil, 9},
		// 1 and 2 have expired at now (the period is 60s): the take drops
		// them, the undo puts them back.
		{"new value", []seen{{80 * time.Second, 1}, {70 * time.Second, 2}, {30 * time.Second, 3}}, 9},
		{"known value", []seen{{30 * time.Second, 3}, {20 * time.Second, 1 << 63}}, 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := keysInSlots(fmt.Sprintf("dundo-%d", i), 2, pick)
			roomy := rules.Op{Kind: rules.OpTake, Algorithm: rules.Distinct, Key: keys[0], Limit: 4, PeriodUS: 60_000_000, Cost: 1, Enforce: true}
			tight := roomy
			tight.Key, tight.Limit, tight.Member = keys[1], 1, 100
			take1(t, s, now, tight) // full now
			for _, h := range tt.history {
				o := roomy
				o.Member = h.member
				take1(t, s, now.Add(-h.ago), o)
			}
			before := setSnapshot(t, c, s, roomy)
			left := peekLeft(t, s, now, roomy)
			undos := s.Stats().Undos
			roomy.Member, tight.Member = tt.member, 101
			res := take1(t, s, now, roomy, tight)
			if !res[0].Allowed || res[1].Allowed {
				t.Fatalf("got %+v, want the roomy op allowed and the tight one refused", res)
			}
			if got := s.Stats().Undos; got != undos+1 {
				t.Errorf("Stats().Undos: got %d, want %d", got, undos+1)
			}
			if res[0].Remaining != left {
				t.Errorf("roomy op's Remaining: got %d, want %d (the state after the undo)", res[0].Remaining, left)
			}
			if after := setSnapshot(t, c, s, roomy); after != before {
				t.Errorf("roomy key after the refused request: got %q, want %q as before", after, before)
			}
		})
	}
}

func TestMiniClusterDistinctUndo(t *testing.T) {
	s, m := miniCluster(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	testDistinctUndo(t, s, c, distinctSlots, storetest.Base.Add(time.Hour))
}

// TestClusterDistinctUndo: testDistinctUndo on keys of two different
// masters of the real cluster.
func TestClusterDistinctUndo(t *testing.T) {
	addrs := clusterAddrs(t)
	c := clusterClient(t, addrs)
	_, master := masters(t, c)
	s := mustNew(t, Options{URL: "redis+cluster://" + addrs, Prefix: testPrefix("dundo"), UseCallerClock: true, Timeout: time.Second})
	defer s.Close()
	otherMaster := func(slots []uint16, slot uint16) bool {
		for _, x := range slots {
			if master(x) == master(slot) {
				return false
			}
		}
		return true
	}
	testDistinctUndo(t, s, c, otherMaster, storetest.Base.Add(time.Hour))
}

// TestMiniClusterDistinctUndoContended: when another request wrote the
// key between the take and its undo, the undo forgets the value it counted
// only while its score is still the take's: another value counted
// meanwhile stays, and so does the same value counted again later.
func TestMiniClusterDistinctUndoContended(t *testing.T) {
	base := storetest.Base.Add(100 * time.Millisecond)
	tests := []struct {
		name     string
		other    uint64        // the value the other request counts
		otherAt  time.Duration // after base
		left     int64
		oursKept bool
	}{
		{"another value", 50, 0, 4, false},
		{"the same value later", 9, time.Microsecond, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, m := miniCluster(t)
			c := redis.NewClient(&redis.Options{Addr: m.Addr()})
			defer c.Close()
			keys := keysInSlots("dcont", 2, distinctSlots)
			roomy := rules.Op{Kind: rules.OpTake, Algorithm: rules.Distinct, Key: keys[0], Limit: 5, PeriodUS: 1_000_000, Cost: 1, Member: 9, Enforce: true}
			tight := roomy
			tight.Key, tight.Limit = keys[1], 1
			take1(t, s, base, tight)
			refusing := tight
			refusing.Member = 10
			o := roomy
			o.Member = tt.other
			s.beforeUndo = func() { take1(t, s, base.Add(tt.otherAt), o) }
			res := take1(t, s, base, roomy, refusing)
			s.beforeUndo = nil
			if !res[0].Allowed || res[1].Allowed {
				t.Fatalf("got %+v, want the roomy op allowed and the tight one refused", res)
			}
			if got := peekLeft(t, s, base.Add(tt.otherAt), roomy); got != tt.left {
				t.Errorf("got %d left, want %d", got, tt.left)
			}
			_, err := c.ZScore(context.Background(), s.keyName(&roomy.Key)+logSuffix, "0000000000000009").Result()
			if kept := err == nil; kept != tt.oursKept {
				t.Errorf("value 9 kept: got %v (%v), want %v", kept, err, tt.oursKept)
			}
		})
	}
}
