package keyhash_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/dchest/siphash"

	"github.com/edge-gateway/edge/behaviour/forgive"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// goldenPolicy has a rule keyed on one characteristic, one on two, a
// count_distinct rule (its Member is a keyed hash too) and a ban (its
// marker's key is the counter key with a flag).
const goldenPolicy = `
identity {
  account = ["json:username"]
}
rule "per-ip" {
  paths  = ["/login"]
  key    = ["ip"]
  limit  = 5
  period = "1m"
}
rule "account-ip" {
  paths  = ["/login"]
  key    = ["account", "ip"]
  limit  = 5
  period = "15m"
}
rule "accounts-per-ip" {
  paths          = ["/login"]
  key            = ["ip"]
  count_distinct = "account"
  limit          = 10
  period         = "1h"
}
`

// goldenRequest is the request every golden key is computed from.
var goldenRequest = rulestest.Req{Method: "POST", Path: "/login", Client: "203.0.113.7", Fields: rulestest.Account("alice@example.com")}

// goldenSecret is the key secret of the golden keys.
var goldenSecret = []byte("golden key secret")

// goldenFormat1 are the counter keys (hex) and the distinct Member of
// goldenRequest under goldenSecret in format 1, as the code before key
// formats existed computed them (HMAC-SHA256, commit 8e2db6d): format 1
// must stay byte for byte what nodes of that version write to a shared
// Redis.
var goldenFormat1 = map[string]string{
	"per-ip":          "77c5fec4d9005a9001901aa86efdc743f9b2ddf534425354",
	"account-ip":      "793b0ec3e502e0cc8be9598a7624085d4a35816b0e0d3979",
	"accounts-per-ip": "dbd06c9dcc5ae58d01901aa86efdc743f9b2ddf534425354",
	"member":          "a23494c2a49dde6f",
}

// goldenKeys runs goldenRequest through an engine over format and
// returns its keys and the distinct Member in goldenFormat1's shape.
func goldenKeys(t *testing.T, opts rules.EngineOptions) map[string]string {
	t.Helper()
	p := rulestest.Load(t, goldenPolicy)
	opts.Store, opts.Secret = rulestest.NewStore(t), goldenSecret
	e, err := rules.NewEngine(opts)
	if err != nil {
		t.Fatal(err)
	}
	s := rules.NewScratch(4)
	e.Check(context.Background(), rulestest.T0, p, goldenRequest.Build(), s)
	got := map[string]string{}
	for _, m := range s.Matches {
		if m.Op < 0 {
			t.Fatalf("rule %s made no op", m.Rule.Name)
		}
		op := s.Ops[m.Op]
		got[m.Rule.Name] = hex.EncodeToString(op.Key[:])
		if op.Algorithm == rules.Distinct {
			var b [8]byte
			for i := range b {
				b[i] = byte(op.Member >> (56 - 8*i))
			}
			got["member"] = hex.EncodeToString(b[:])
		}
	}
	return got
}

// TestGoldenFormat1: an engine forced to format 1 keys a request exactly
// as nodes before key formats did (goldenFormat1), in Check and in
// KeyFromText (forgive's keys).
func TestGoldenFormat1(t *testing.T) {
	opts := rules.EngineOptions{KeyFormats: rules.KeyFormats{Format: rules.KeyFormat1}}
	got := goldenKeys(t, opts)
	for name, want := range goldenFormat1 {
		if got[name] != want {
			t.Errorf("%s: got %s, want %s", name, got[name], want)
		}
	}
	opts.Store, opts.Secret = rulestest.NewStore(t), goldenSecret
	e, err := rules.NewEngine(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := rulestest.Load(t, goldenPolicy)
	k, err := forgive.KeyFromText(e, p, p.Rule("account-ip"), map[string]string{"account": "Alice@Example.com", "ip": "203.0.113.7"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(k[:]), goldenFormat1["account-ip"]; got != want {
		t.Errorf("KeyFromText: got %s, want %s", got, want)
	}
}

// goldenFormat2 pins format 2 as goldenFormat1 pins format 1: once a
// fleet writes format 2 keys, they must not change either.
var goldenFormat2 = map[string]string{
	"per-ip":          "77c5fec4d9005a9001291691c6f77647c879d399a6e417d7",
	"account-ip":      "793b0ec3e502e0cc8b2af9b2e6565dd32d639a3eb02d577a",
	"accounts-per-ip": "dbd06c9dcc5ae58d01291691c6f77647c879d399a6e417d7",
	"member":          "e7d38f3c74a73122",
}

// TestGoldenFormat2: the zero KeyFormats is format 2; its keys keep the
// rule ID and tag bytes of format 1 and differ in the hash.
func TestGoldenFormat2(t *testing.T) {
	got := goldenKeys(t, rules.EngineOptions{})
	for name, want := range goldenFormat2 {
		if got[name] != want {
			t.Errorf("%s: got %s, want %s", name, got[name], want)
		}
		if name != "member" && got[name][:18] != goldenFormat1[name][:18] {
			t.Errorf("%s: got ID and tag %s, want format 1's %s", name, got[name][:18], goldenFormat1[name][:18])
		}
	}
}

// TestKeyFormatHashes: each format's hash is its definition
// (internal/keyhash's doc), computed here from the primitives: HMAC-SHA256
// under the secret, and SipHash-2-4-128 under HMAC-SHA256(secret, "edge key
// format 2")[:16], the output's halves little-endian, truncated to 15
// bytes.
func TestKeyFormatHashes(t *testing.T) {
	secret := []byte("another secret")
	value := rules.AppendValue(nil, "some value")
	id := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	m := hmac.New(sha256.New, secret)
	m.Write(value)
	want1 := m.Sum(nil)[:15]
	m = hmac.New(sha256.New, secret)
	m.Write([]byte("edge key format 2"))
	sub := m.Sum(nil)
	lo, hi := siphash.Hash128(binary.LittleEndian.Uint64(sub[0:8]), binary.LittleEndian.Uint64(sub[8:16]), value)
	want2 := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, lo), hi)[:15]
	p := rulestest.Load(t, goldenPolicy)
	for _, tt := range []struct {
		format rules.KeyFormat
		want   []byte
	}{{rules.KeyFormat1, want1}, {rules.KeyFormat2, want2}} {
		e, err := rules.NewEngine(rules.EngineOptions{Store: rulestest.NewStore(t), Secret: secret, KeyFormats: rules.KeyFormats{Format: tt.format}})
		if err != nil {
			t.Fatal(err)
		}
		s := rules.NewScratch(4)
		e.Check(context.Background(), rulestest.T0, p, goldenRequest.Build(), s) // HashKey hashes in the format of the request Check decided
		k := s.HashKey(id, 7, value)
		if !bytes.Equal(k[9:], tt.want) || !bytes.Equal(k[:8], id[:]) || k[8] != 7 {
			t.Errorf("format %d: got %x, want %x, 07, %x", tt.format, k, id, tt.want)
		}
	}
}

func TestHashClientIsKeyedAndStable(t *testing.T) {
	a, b := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("203.0.113.8")
	e1, e2 := rulestest.NewEngine(t, nil), rulestest.NewEngine(t, nil)
	if e1.HashClient(a) != e2.HashClient(a) {
		t.Error("one secret: the hashes of one address differ")
	}
	if e1.HashClient(a) == e1.HashClient(b) {
		t.Error("two addresses hash alike")
	}
	other, err := rules.NewEngine(rules.EngineOptions{Store: e1.Store(), Secret: []byte("another secret")})
	if err != nil {
		t.Fatal(err)
	}
	if other.HashClient(a) == e1.HashClient(a) {
		t.Error("another secret: the hash is the same (not keyed)")
	}
	// The Scratch's hash, after a Check, is the Engine's.
	p := rulestest.Load(t, `
rule "r" {
  key   = ["ip"]
  limit = 1
  period = "1h"
}`)
	s := rules.NewScratch(1)
	e1.Check(context.Background(), rulestest.T0, p, rulestest.Req{Method: "GET", Path: "/", Client: a.String()}.Build(), s)
	if s.HashClient(a) != e1.HashClient(a) {
		t.Error("Scratch.HashClient differs from Engine.HashClient")
	}
}
