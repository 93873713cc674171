package main

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/otp"
)

// The example numbers, relative to this package's directory.
const otpPhonesPath = "../testdata/data/phones/libphonenumber-example-numbers.csv"

func TestOTPBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reached, bound int64
		exceeded       bool
		verdict        string
	}{
		{0, 0, false, "ok"},
		{5, 5, false, "ok"}, // the bound itself is allowed
		{4, 5, false, "ok"},
		{6, 5, true, "EXCEEDED by 1"},
		{100, 5, true, "EXCEEDED by 95"},
		{1, 0, true, "EXCEEDED by 1"},
	}
	for _, tt := range tests {
		b := otpBound{what: "block sends", attempted: 100, reached: tt.reached, bound: tt.bound, source: "-range-limit"}
		if got := b.exceeded(); got != tt.exceeded {
			t.Errorf("%+v: exceeded() = %v, want %v", b, got, tt.exceeded)
		}
		if got := b.verdict(); got != tt.verdict {
			t.Errorf("%+v: verdict() = %q, want %q", b, got, tt.verdict)
		}
		f := b.failure()
		if (f != "") != tt.exceeded {
			t.Errorf("%+v: failure() = %q", b, f)
		}
	}
	b := otpBound{what: "block sends", attempted: 100, reached: 100, bound: 5, source: "-range-limit"}
	if got, want := b.failure(), "100 of 100 block sends reached the origin, over the bound of 5 (-range-limit)"; got != want {
		t.Errorf("failure() = %q, want %q", got, want)
	}
	ok := otpBound{what: "foreign sends", attempted: 36, reached: 0, bound: 0}
	if got := otpFailures(ok, b, ok); len(got) != 1 || !strings.HasPrefix(got[0], "100 of 100 block sends") {
		t.Errorf("otpFailures = %q, want the one breach", got)
	}
	if got := otpFailures(ok, ok); got != nil {
		t.Errorf("otpFailures = %q, want none", got)
	}
}

func TestOTPReached(t *testing.T) {
	t.Parallel()
	before := otpHits{"/otp/send": 7, "/otp/verify": 2}
	after := otpHits{"/otp/send": 12, "/otp/verify": 2, "/api/x": 4}
	if got, err := otpReached(before, after, otpSendPath); err != nil || got != 5 {
		t.Errorf("send: got %d, %v; want 5", got, err)
	}
	if got, err := otpReached(before, after, otpVerifyPath); err != nil || got != 0 {
		t.Errorf("verify: got %d, %v; want 0", got, err)
	}
	// A path first seen after the run started.
	if got, err := otpReached(otpHits{}, after, otpSendPath); err != nil || got != 12 {
		t.Errorf("new path: got %d, %v; want 12", got, err)
	}
	// The origin was reset in between: the difference means nothing.
	if _, err := otpReached(after, otpHits{"/otp/send": 1}, otpSendPath); err == nil || !strings.Contains(err.Error(), "reset or restarted") {
		t.Errorf("reset origin: got %v, want an error", err)
	}
}

func TestOTPCheckOrigin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reached, forwarded, sent int64
		wantErr                  string
	}{
		{5, 5, 100, ""},
		{0, 0, 100, ""},
		{100, 100, 100, ""},
		{0, 5, 100, "is -origin the edge's upstream?"}, // the edge passed on answers the origin did not count
		{101, 5, 100, "other traffic reached it"},
	}
	for _, tt := range tests {
		err := otpCheckOrigin(otpSendPath, tt.reached, tt.forwarded, tt.sent)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%+v: %v", tt, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%+v: got %v, want %q", tt, err, tt.wantErr)
		}
	}
}

func TestOTPTallyAndStatuses(t *testing.T) {
	t.Parallel()
	var tl otpTally
	if got := otpStatuses(tl.statuses); got != "none" {
		t.Errorf("empty: %q", got)
	}
	for range 95 {
		tl.add(429, false)
	}
	for range 5 {
		tl.add(200, true)
	}
	if tl.sent != 100 || tl.forwarded != 5 {
		t.Errorf("sent %d, forwarded %d; want 100, 5", tl.sent, tl.forwarded)
	}
	if got, want := otpStatuses(tl.statuses), "200 ×5, 429 ×95"; got != want {
		t.Errorf("otpStatuses = %q, want %q", got, want)
	}
}

func TestOTPChallenge(t *testing.T) {
	t.Parallel()
	body := []byte(`{"challenge_id":"ABC","demo_code":"012345"}`)
	if id, code := otpChallenge(200, body); id != "ABC" || code != "012345" {
		t.Errorf("200: got %q, %q", id, code)
	}
	if id, _ := otpChallenge(429, body); id != "" {
		t.Errorf("429: got challenge %q, want none", id)
	}
	if id, _ := otpChallenge(200, []byte(`{"ok":true}`)); id != "" {
		t.Errorf("200 without a challenge: got %q", id)
	}
	if id, _ := otpChallenge(200, []byte(`not json`)); id != "" {
		t.Errorf("200, not JSON: got %q", id)
	}
}

func TestOTPClientAddrs(t *testing.T) {
	t.Parallel()
	a := &otpClientAddrs{next: maxClients - 2}
	got := []string{a.peek(), a.take(), a.take(), a.take()}
	want := []string{"198.19.255.254", "198.19.255.254", "198.19.255.255", "198.18.0.0"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("address %d: got %s, want %s (all %q)", i, got[i], want[i], got)
		}
	}
	r := newOTPClientAddrs()
	if r.next < 0 || r.next >= maxClients {
		t.Errorf("random start %d outside [0, %d)", r.next, maxClients)
	}
}

func TestPickOTPBlock(t *testing.T) {
	t.Parallel()
	// 202 (Washington, DC) is an assigned area code; 211 is a service code,
	// never an area code, which the block check must skip.
	if _, ok := otpBlockFor(211); ok {
		t.Fatal("area code 211 passed the block check")
	}
	picks := []int{211 - 200, 202 - 200}
	calls := 0
	b, err := pickOTPBlock(func(n int) int {
		if n != 800 {
			t.Fatalf("intN(%d), want intN(800)", n)
		}
		calls++
		return picks[calls-1]
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("%d picks, want 2 (211 skipped)", calls)
	}
	if len(b.phones) != otpBlockSize || b.phones[0] != "+12025550100" || b.phones[otpBlockSize-1] != "+12025550199" || b.rng != "+12025550" {
		t.Fatalf("block %s … %s (range %s), %d numbers", b.phones[0], b.phones[len(b.phones)-1], b.rng, len(b.phones))
	}
	seen := map[string]bool{}
	for _, ph := range b.phones {
		p, err := otp.Normalize(ph, "")
		if err != nil || p.E164 != ph || p.Range() != b.rng || !otpAllowed(p.Country()) || seen[ph] {
			t.Errorf("%s: %+v, %v", ph, p, err)
		}
		seen[ph] = true
	}
	// Random picks: always a block, whatever the area code.
	for range 20 {
		if _, err := pickOTPBlock(rand.IntN); err != nil {
			t.Fatal(err)
		}
	}
	// No area code passes.
	if _, err := pickOTPBlock(func(int) int { return 11 }); err == nil {
		t.Error("no valid area code: got a block")
	}
}
