package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// handoverPolicy bans an IP for 15 minutes at its third login in a minute:
// a lockout far longer than the rule's period.
const handoverPolicy = `
rule "login" {
  paths  = ["/login"]
  key    = ["ip"]
  limit  = 2
  period = "1m"
  ban    = "15m"
}
`

// stateOfVersion1 is the state pipe as a binary before key formats wrote
// it (upgrade state version 1: the secrets, then the counters), for ms's
// counters.
func stateOfVersion1(t *testing.T, secret []byte, ms *memstore.Store) []byte {
	t.Helper()
	b := append([]byte(upgradeMagic), upgradeVersionNoFormats)
	b = binary.AppendUvarint(b, uint64(len(secret)))
	b = append(b, secret...)
	b = binary.AppendUvarint(b, 0) // no visitor secret
	var w bytes.Buffer
	w.Write(b)
	if _, err := writeCounters(&w, time.Now(), ms); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

// loginAllowed decides one login from 192.0.2.7 at now.
func loginAllowed(t *testing.T, e *rules.Engine, p *rules.Policy, now time.Time) bool {
	t.Helper()
	req := &rules.Request{Method: []byte("POST"), Path: route.AppendMatchPath(nil, []byte("/login"), true), Client: netip.MustParseAddr("192.0.2.7")}
	d := e.Check(context.Background(), now, p, req, rules.NewScratch(len(p.Rules)))
	if d.StoreErr != nil {
		t.Fatalf("store: %v", d.StoreErr)
	}
	return d.Verdict == rules.Forward
}

// TestBinaryUpgradeKeepsFormat1Lockouts: a memory-store node before key
// formats (format 1 keys, upgrade state version 1) hands a running ban
// over to this binary, which hashes in format 2: the ban must still
// refuse after the hand-over, all through its 15 minutes, and the client
// must not get a fresh budget beside it; a node handed over without the
// migration window (format 2 alone) would let the client in, which the
// test checks too, so it can fail.
func TestBinaryUpgradeKeepsFormat1Lockouts(t *testing.T) {
	p, diags := builtin.Load("handover.hcl", []byte(handoverPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	secret := bytes.Repeat([]byte{7}, 32)
	t0 := time.Now() // the memory store's snapshot keeps deadlines on the wall clock
	old, err := memstore.New(memstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldEngine, err := rules.NewEngine(rules.EngineOptions{Store: old, Secret: secret, KeyFormats: rules.KeyFormats{Format: rules.KeyFormat1}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false, false} {
		if got := loginAllowed(t, oldEngine, p, t0.Add(time.Duration(i)*time.Second)); got != want {
			t.Fatalf("old node, login %d: allowed %v, want %v", i+1, got, want)
		}
	}
	state := stateOfVersion1(t, secret, old)

	for _, tt := range []struct {
		name       string
		formats    func(h *inheritance, now time.Time) rules.KeyFormats
		wantBanned bool
	}{
		{"with the window", func(h *inheritance, now time.Time) rules.KeyFormats {
			return h.memoryKeyFormats(now, p.LongestKeyLifetime())
		}, true},
		{"format 2 alone", func(*inheritance, time.Time) rules.KeyFormats { return rules.KeyFormats{Format: rules.KeyFormat2} }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newInheritance(t, state)
			if h.keyFormats.Format != rules.KeyFormat1 || !h.keyFormats.DualUntil.IsZero() {
				t.Fatalf("a version 1 state: got key formats %+v, want format 1 alone", h.keyFormats)
			}
			fresh, err := memstore.New(memstore.Options{SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			if err := h.takeOver(fresh, secret); err != nil {
				t.Fatal(err)
			}
			now := t0.Add(10 * time.Second)
			f := tt.formats(h, now)
			e, err := rules.NewEngine(rules.EngineOptions{Store: fresh, Secret: secret, KeyFormats: f})
			if err != nil {
				t.Fatal(err)
			}
			// Within the ban (15 minutes from t0+2s), a minute and more after
			// the rule's own period: only the ban can refuse.
			for _, at := range []time.Duration{10 * time.Second, 5 * time.Minute, 14 * time.Minute} {
				if got := loginAllowed(t, e, p, t0.Add(at)); got == tt.wantBanned {
					t.Errorf("new node at t0+%v: allowed %v, want banned %v (formats %+v)", at, got, tt.wantBanned, f)
				}
			}
			if tt.wantBanned && !f.DualUntil.After(t0.Add(15*time.Minute)) {
				t.Errorf("the window ends at %v, before the ban's end", f.DualUntil)
			}
		})
	}
}

// TestUpgradeStateHandsKeyFormats: a node in a migration window hands its
// window over, to go on to its end; one on format 2 hands format 2.
func TestUpgradeStateHandsKeyFormats(t *testing.T) {
	until := time.UnixMicro(time.Now().Add(time.Hour).UnixMicro())
	for _, f := range []rules.KeyFormats{{Format: rules.KeyFormat2, DualUntil: until}, {Format: rules.KeyFormat2}} {
		h, _ := newInheritance(t, stateOf(t, handedState{keySecret: bytes.Repeat([]byte{7}, 32), formats: func() rules.KeyFormats { return f }}, nil))
		if !h.keyFormats.DualUntil.Equal(f.DualUntil) || h.keyFormats.Format != f.Format {
			t.Errorf("handed %+v, read %+v", f, h.keyFormats)
		}
		now := time.Now()
		got := h.memoryKeyFormats(now, time.Hour)
		if got.Format != rules.KeyFormat2 || !got.DualUntil.Equal(f.DualUntil) {
			t.Errorf("handed %+v: the new node runs %+v, want the same window", f, got)
		}
	}
}
