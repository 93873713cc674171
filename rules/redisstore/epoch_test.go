package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// TestEpochFindsAReset: on a real redis-server, the first check adopts the
// epoch, later ones find nothing until the epoch is gone (Redis emptied):
// the node that finds it gone reports a reset and writes a new epoch, and
// a second node of the fleet, which read the old one, reports the reset
// too when it finds the new one. A NOSCRIPT reply wakes the check.
func TestEpochFindsAReset(t *testing.T) {
	addr := redisAddr(t)
	ctx := context.Background()
	prefix := testPrefix("epoch")
	a := mustNew(t, Options{URL: "redis://" + addr, Prefix: prefix, Timeout: time.Second})
	b := mustNew(t, Options{URL: "redis://" + addr, Prefix: prefix, Timeout: time.Second})
	t.Cleanup(func() { rawClient(t, addr).Del(context.Background(), prefix+epochKey) })
	for i, s := range []*Store{a, b, a, b} {
		if resets, err := s.CheckEpoch(ctx); err != nil || len(resets) != 0 {
			t.Fatalf("check %d before any reset: got %v, %v; want none", i, resets, err)
		}
	}
	raw := rawClient(t, addr)
	if err := raw.Del(ctx, prefix+epochKey).Err(); err != nil { // what a restart without data does to it
		t.Fatal(err)
	}
	resets, err := a.CheckEpoch(ctx)
	if err != nil || len(resets) != 1 || !resets[0].Gone {
		t.Fatalf("the node that finds the epoch gone: got %v, %v; want one reset, gone", resets, err)
	}
	if n, _ := raw.Exists(ctx, prefix+epochKey).Result(); n != 1 {
		t.Errorf("the epoch was not written back")
	}
	resets, err = b.CheckEpoch(ctx)
	if err != nil || len(resets) != 1 || resets[0].Gone {
		t.Fatalf("the node that finds another's new epoch: got %v, %v; want one reset, not gone", resets, err)
	}
	for i, s := range []*Store{a, b} {
		if resets, err := s.CheckEpoch(ctx); err != nil || len(resets) != 0 {
			t.Errorf("node %d, once the fleet agrees again: got %v, %v; want none", i, resets, err)
		}
		if got := s.Stats().EpochResets; got != 1 {
			t.Errorf("node %d: Stats().EpochResets = %d, want 1", i, got)
		}
	}

	select {
	case <-a.EpochWake():
		t.Fatal("EpochWake signalled before any NOSCRIPT")
	default:
	}
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Take(ctx, time.Now(), []rules.Op{gcra('e', 5)}, make([]rules.Result, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.EpochWake():
	default:
		t.Error("a NOSCRIPT reply did not signal EpochWake")
	}
}

// TestEpochPerMaster: on a real Redis Cluster the store keeps one epoch
// per master, each in a slot that master serves, so a master that comes
// back empty is found alone.
func TestEpochPerMaster(t *testing.T) {
	addrs := clusterAddrs(t)
	ctx := context.Background()
	prefix := testPrefix("epoch")
	s := mustNew(t, Options{URL: "redis+cluster://" + addrs, Prefix: prefix, Timeout: time.Second})
	c := clusterClient(t, addrs)
	keys, err := s.epochKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		m, err := c.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Options().Addr] = true
	}
	ms, _ := masters(t, c)
	if len(keys) != len(ms) || len(seen) != len(ms) {
		t.Fatalf("epoch keys %v on %d masters, want one on each of %d", keys, len(seen), len(ms))
	}
	if resets, err := s.CheckEpoch(ctx); err != nil || len(resets) != 0 {
		t.Fatalf("first check: got %v, %v", resets, err)
	}
	if err := c.Del(ctx, keys[1]).Err(); err != nil {
		t.Fatal(err)
	}
	resets, err := s.CheckEpoch(ctx)
	if err != nil || len(resets) != 1 || resets[0].Key != keys[1] || !resets[0].Gone {
		t.Fatalf("one master emptied: got %v, %v; want one reset of %s", resets, err, keys[1])
	}
	t.Cleanup(func() { c.Del(context.Background(), keys...) })
}
