package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testredis"
)

// TestEvictions reads a real redis-server's eviction settings as CONFIG
// SET leaves them, one policy after another, and classifies each.
func TestEvictions(t *testing.T) {
	r := testredis.Start(t)
	s := mustNew(t, Options{URL: r.URL(), Timeout: time.Second})
	defer s.Close()
	if _, err := r.Do("CONFIG", "SET", "maxmemory", "104857600"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		policy string
		want   Risk
	}{
		{"noeviction", RiskNone},
		{"volatile-ttl", RiskDecayed},
		{"volatile-lru", RiskLive},
		{"volatile-lfu", RiskLive},
		{"volatile-random", RiskLive},
		{"allkeys-lru", RiskAnyKey},
		{"allkeys-lfu", RiskAnyKey},
		{"allkeys-random", RiskAnyKey},
	}
	for _, tt := range tests {
		if _, err := r.Do("CONFIG", "SET", "maxmemory-policy", tt.policy); err != nil {
			t.Fatal(err)
		}
		evs, err := s.Evictions(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", tt.policy, err)
		}
		want := Eviction{Addr: r.Addr(), Policy: tt.policy, MaxMemory: 104857600}
		if len(evs) != 1 || evs[0] != want {
			t.Fatalf("%s: got %+v, want [%+v]", tt.policy, evs, want)
		}
		if got := evs[0].Risk(); got != tt.want {
			t.Errorf("%s: got risk %d, want %d", tt.policy, got, tt.want)
		}
	}
	if got := (Eviction{Policy: "something-new"}).Risk(); got != RiskUnknown {
		t.Errorf("an unknown policy: got risk %d, want RiskUnknown", got)
	}
}

// TestEvictionsRefused: a server that refuses CONFIG (as managed Redis
// services do; here an ACL user without it) gives an error that names the
// command, never a guess.
func TestEvictionsRefused(t *testing.T) {
	r := testredis.Start(t)
	if _, err := r.Do("ACL", "SETUSER", "edge", "on", ">edge-pass", "~*", "+@all", "-config"); err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, Options{URL: "redis://edge:edge-pass@" + r.Addr() + "/0", Timeout: time.Second})
	defer s.Close()
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("the user can run the store: %v", err)
	}
	evs, err := s.Evictions(context.Background())
	if err == nil || !strings.Contains(err.Error(), "CONFIG GET") || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("got %+v, %v; want a NOPERM error naming CONFIG GET", evs, err)
	}
}

// TestEvictionsCluster reads every master of the real cluster in
// $EDGE_REDIS_CLUSTER_ADDRS (without changing them: other tests share it).
func TestEvictionsCluster(t *testing.T) {
	addrs := clusterAddrs(t)
	s := mustNew(t, Options{URL: "redis+cluster://" + addrs, Timeout: time.Second})
	defer s.Close()
	evs, err := s.Evictions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 3 {
		t.Fatalf("got %+v, want one per master (3)", evs)
	}
	for _, e := range evs {
		if e.Addr == "" || e.Policy == "" {
			t.Errorf("got %+v, want an address and a policy", e)
		}
	}
}
