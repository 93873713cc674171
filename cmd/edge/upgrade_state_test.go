package main

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// The state pipe of a binary upgrade (upgrade.go), between an old and a
// new store in this process: the counters come over, and a pipe that does
// not carry them leaves the new store empty, loudly, never stopping the
// node.

// stateOf runs the old process's side into a buffer: the handed state,
// then the counters of old (nil: a Redis node's).
func stateOf(t *testing.T, st handedState, old *memstore.Store) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeHandedState(&b, st); err != nil {
		t.Fatal(err)
	}
	if _, err := writeCounters(&b, time.Now(), old); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// newInheritance is the new process's side reading state, its ready pipe
// drained by the test; logs go to the returned buffer.
func newInheritance(t *testing.T, state []byte) (*inheritance, *syncBuffer) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "state")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(state); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	logs := &syncBuffer{}
	h := &inheritance{log: slog.New(slog.NewJSONHandler(logs, nil)), readyW: w, state: f, stateR: bufio.NewReader(f)}
	if err := h.readHandedState(); err != nil {
		t.Fatalf("reading the handed state: %v", err)
	}
	return h, logs
}

func refusingStore(t *testing.T) (*memstore.Store, rules.Op) {
	t.Helper()
	s, err := memstore.New(memstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	op := rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{'u', 'p', 'g'}, Limit: 1, Burst: 1,
		PeriodUS: time.Hour.Microseconds(), Cost: 1, Enforce: true, MaxKeys: 10, Sensitive: true, OnError: rules.FailClosed}
	res := make([]rules.Result, 1)
	for range 2 {
		if err := s.Take(context.Background(), time.Now(), []rules.Op{op}, res); err != nil {
			t.Fatal(err)
		}
	}
	if res[0].Allowed {
		t.Fatal("the old store does not refuse")
	}
	return s, op
}

func TestUpgradeStateHandsCountersAndSecrets(t *testing.T) {
	old, op := refusingStore(t)
	secret, visitor := bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{9}, 32)
	h, logs := newInheritance(t, stateOf(t, handedState{keySecret: secret, visitorSecret: visitor}, old))
	if !bytes.Equal(h.handedKeySecret(), secret) || !bytes.Equal(visitorSecretFor(h), visitor) {
		t.Fatal("the secrets did not come over")
	}
	fresh, _ := memstore.New(memstore.Options{SweepInterval: -1})
	defer fresh.Close()
	if err := h.takeOver(fresh, secret); err != nil {
		t.Fatal(err)
	}
	res := make([]rules.Result, 1)
	if err := fresh.Take(context.Background(), time.Now(), []rules.Op{op}, res); err != nil {
		t.Fatal(err)
	}
	if res[0].Allowed {
		t.Errorf("the refused key after the hand-over: got %+v, want refused", res[0])
	}
	if !strings.Contains(logs.String(), `"keys":1`) || !strings.Contains(logs.String(), "accept_gap_ms") {
		t.Errorf("the log does not say what came over:\n%s", logs.String())
	}
}

func TestUpgradeStateThatFailsLeavesTheStoreEmptyLoudly(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	old, _ := refusingStore(t)
	good := stateOf(t, handedState{keySecret: secret}, old)
	head := len(stateOf(t, handedState{keySecret: secret}, nil)) - 1 // up to the store byte
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-10] ^= 0xff
	tests := []struct {
		name   string
		state  []byte
		secret []byte
		want   string
	}{
		{"corrupted", corrupt, secret, "bad snapshot"},
		{"truncated", good[:len(good)-7], secret, "truncated"},
		{"no counters at all", good[:head-3], secret, "unexpected EOF"},
		{"another key secret", good, bytes.Repeat([]byte{8}, 32), "key secret changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, logs := newInheritance(t, tt.state)
			fresh, _ := memstore.New(memstore.Options{SweepInterval: -1})
			defer fresh.Close()
			if err := h.takeOver(fresh, tt.secret); err != nil {
				t.Fatalf("takeOver stops the node: %v", err)
			}
			if fresh.Len() != 0 {
				t.Errorf("the store holds %d keys", fresh.Len())
			}
			if l := logs.String(); !strings.Contains(l, "BINARY UPGRADE LOST THE COUNTERS") || !strings.Contains(l, `"level":"ERROR"`) || !strings.Contains(l, tt.want) {
				t.Errorf("the log does not say so at error level, with %q:\n%s", tt.want, l)
			}
		})
	}
}

func TestUpgradeStateRefusesAnOversizedSecret(t *testing.T) {
	var b bytes.Buffer
	writeHandedState(&b, handedState{keySecret: make([]byte, maxHandedSecret+1)})
	h := &inheritance{stateR: bufio.NewReader(&b)}
	if err := h.readHandedState(); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("got %v, want a secret too long", err)
	}
	h = &inheritance{stateR: bufio.NewReader(strings.NewReader("edge-upgrade\x03"))}
	if err := h.readHandedState(); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("another version: got %v", err)
	}
}
