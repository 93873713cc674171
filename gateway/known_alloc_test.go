//go:build !race

package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/nat"
)

// benchKnownPolicy adds known callers to the visitor bench policy: a known
// block on the bench route (by visitor and account), a
// rule that exempts it, and a banning failures rule under ban_by's default.
// The account is a header characteristic: an identity { } source, from a
// header or a body, costs an allocation of its own (fields.Lookup's
// string), before and apart from known callers.
const benchKnownPolicy = benchVisitorPolicy + `
known "logged-in" {
  paths = ["/login"]
  by    = ["visitor", "header:X-User"]
  for   = "30d"
}
rule "per-network-known" {
  paths        = ["/login"]
  key          = ["ip"]
  ipv4_prefix  = 24
  algorithm    = "sliding_window"
  limit        = 100000
  period       = "1m"
  exempt_known = ["logged-in"]
}
rule "stuffing" {
  paths            = ["/login"]
  key              = ["ip"]
  count            = "failures"
  count_distinct   = "header:X-User"
  limit            = 1000
  period           = "1h"
  ban              = "15m"
  missing_identity = "skip"
}
`

// TestKnownCallerDecisionPathAllocatesNothing: resolving a known block's
// marker (by visitor and account), checking it with the bans and their guilt markers in the call
// before the main one, exempting the known caller, and writing the
// markers after the origin's answer add no allocation; nor do the mint
// budget's fingerprint and reserve ops of a request without a cookie.
func TestKnownCallerDecisionPathAllocatesNothing(t *testing.T) {
	bs := newBenchSetupWith(t, benchKnownPolicy, "10.1.2.3", "203.0.113.9, 10.0.0.2", validCookie)
	bs.ctx.Request.Header.Set("X-User", "alice@example.com")
	ctx := context.Background()
	known := func() bool {
		bs.s.decide(bs.ctx, bs.st, bs.rs)
		for _, m := range bs.rs.sc.Matches {
			if m.Rule.Name == "per-network-known" {
				return m.Known
			}
		}
		return false
	}
	if known() {
		t.Fatal("known before any success")
	}
	if _, err := bs.s.engine.Settle(ctx, bs.rs.now, bs.rs.sc, 200, nil); err != nil {
		t.Fatal(err)
	}
	if !known() {
		t.Fatal("not known after a success")
	}
	if n := testing.AllocsPerRun(200, func() { bs.s.decide(bs.ctx, bs.st, bs.rs) }); n != 0 {
		t.Errorf("decision path of a known caller allocates %.1f times per request, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		bs.s.decide(bs.ctx, bs.st, bs.rs)
		if _, err := bs.s.engine.Settle(ctx, bs.rs.now, bs.rs.sc, 401, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a known caller's decision and settle allocate %.1f times per request, want 0", n)
	}

	cookieless := newBenchSetupWith(t, benchKnownPolicy, "10.1.2.3", "203.0.113.9, 10.0.0.2", nil)
	cookieless.ctx.Request.Header.Set("User-Agent", "Mozilla/5.0 (bench)")
	cookieless.ctx.Request.Header.Set("Accept-Language", "en-GB,en;q=0.9")
	cookieless.s.decide(cookieless.ctx, cookieless.st, cookieless.rs)
	if src := nat.ConfigOf(cookieless.st.policy).MintFrom(cookieless.rs.sc, &cookieless.rs.d); src != nat.MintBulk {
		t.Fatalf("the cookieless request mints from %d, want the bulk budget", src)
	}
	if n := testing.AllocsPerRun(200, func() { cookieless.s.decide(cookieless.ctx, cookieless.st, cookieless.rs) }); n != 0 {
		t.Errorf("decision path of a request without a cookie (mint, fingerprint and reserve ops) allocates %.1f times per request, want 0", n)
	}
}

// TestMintReserveDrawAllocatesNothing: a request without a cookie that
// draws on the mint reserve (the bulk budget spent, its fingerprint new)
// takes the reserve in the settle call and, when the take allows it, mints
// its ID then: neither allocates.
func TestMintReserveDrawAllocatesNothing(t *testing.T) {
	src := strings.Replace(benchVisitorPolicy, "visitor {\n", "visitor {\n  mint_limit = 1\n", 1)
	bs := newBenchSetupWith(t, src, "10.1.2.3", "203.0.113.9, 10.0.0.2", nil)
	v, sc, signer := nat.ConfigOf(bs.st.policy), bs.rs.sc, benchSigner(bs.s)
	var cookie []byte
	if from := v.MintFrom(sc, &bs.rs.d); from != nat.MintBulk {
		t.Fatalf("the first request mints from %d, want the bulk budget", from)
	}
	bs.ctx.Request.Header.Set("User-Agent", "Mozilla/5.0 (a fingerprint of its own)")
	bs.s.decide(bs.ctx, bs.st, bs.rs)
	if from := v.MintFrom(sc, &bs.rs.d); from != nat.MintReserve {
		t.Fatalf("a new fingerprint after the bulk budget mints from %d, want the reserve", from)
	}
	ctx := context.Background()
	draws := 0
	draw := func() {
		if !v.DrawReserve(sc) {
			t.Fatal("no draw due")
		}
		if _, err := bs.s.engine.Settle(ctx, bs.rs.now, sc, 200, nil); err != nil {
			t.Fatal(err)
		}
		if v.ReserveDrawn(sc) {
			cookie, _ = signer.Mint(cookie[:0], bs.rs.now)
			draws++
		}
	}
	draw()
	if draws != 1 {
		t.Fatal("the reserve refused the first draw")
	}
	if n := testing.AllocsPerRun(200, draw); n != 0 {
		t.Errorf("a draw on the mint reserve (its take in the settle call, the ID it mints) allocates %.1f times per request, want 0", n)
	}
	if want := int(v.MintReserve); draws != want {
		t.Errorf("%d draws of one request were allowed, want the reserve's %d (each take is conditional)", draws, want)
	}
}
