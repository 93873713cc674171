package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// What a security tester found in the known callers of issue 24 (findings
// 2 to 5), through the real server on the shipped policies.hcl, on a fake
// clock: markers that exempt a caller name it exactly (the account as it
// was sent, the visitor by its ID alone), a success that may be another
// caller's clears no counter, and a phone is known only by verifying a
// code sent to it. Each test plays the attack, then a control.

// post sends body (JSON) to path as c.
func (c *caller) post(path, body string) int {
	c.w.t.Helper()
	return do(c.w.t, "POST", "http://"+c.w.n.addr+path, body, c.headers()...).status
}

// TestOwnLoginBesideAVictimClearsNoCounter is finding 2: four wrong
// guesses at a victim's account, then the attacker's own successful login,
// again and again: naming its username beside the victim's email (an
// origin that logs in by the username when there is one), or its own
// account spelled like the victim's ("Rene-y" beside "rene-y", at an
// origin that keeps case apart). The success used to reset the counter of
// every value it was counted on, the victim's login-failures-account-
// client among them: one client got every guess to the origin. It gives
// back its own charge now and clears no counter another account may
// share: the client is held to the rule's 5 failures. Control: the victim
// logs in from its own address, and the attacker's own login naming its
// account alone, as counted, works.
func TestOwnLoginBesideAVictimClearsNoCounter(t *testing.T) {
	tests := []struct {
		name, guess, own, alone string
	}{
		{"beside", `{"email":"victim@example.com","password":"wrong"}`,
			`{"username":"mallory","email":"victim@example.com","password":"letmein-demo"}`,
			`{"username":"mallory","password":"letmein-demo"}`},
		{"spelled-like", `{"username":"rene-y","password":"wrong"}`,
			`{"username":"Rene-y","password":"letmein-demo"}`,
			`{"username":"mallory","password":"letmein-demo"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, clk, _ := shippedNode(t)
			attacker := w.caller("203.0.113.70", "attack/1.0")
			if !attacker.page() {
				t.Fatal("the attacker got no visitor cookie")
			}
			guesses := 0
			for range 4 {
				for range 4 {
					if attacker.post("/login", tt.guess) == http.StatusUnauthorized {
						guesses++
					}
				}
				attacker.post("/login", tt.own)
				clk.Advance(time.Minute) // login-per-visitor: five a minute
			}
			if guesses != 5 {
				t.Errorf("one client's wrong guesses at the victim that reached the origin: %d, want login-failures-account-client's 5", guesses)
			}
			victim := w.caller("198.51.100.70", "Mozilla/5.0 (victim)")
			if got := victim.post("/login", strings.Replace(tt.guess, "wrong", "letmein-demo", 1)); got != http.StatusOK {
				t.Errorf("the victim's login from its own address: got %d, want 200", got)
			}
			if got := attacker.post("/login", tt.alone); got != http.StatusOK {
				t.Errorf("the attacker's login to its own account alone: got %d, want 200", got)
			}
		})
	}
}

// TestOwnAccountSpelledLikeAVictimsMakesNoBrowserKnownForIt is finding 3:
// 14 clients, each logging in to the attacker's own account spelled like
// the victim's ("rené-x" at an origin that keeps accents apart, "Rene-x"
// at one that keeps case apart), then guessing five times at the victim's
// "rene-x". Known markers used to name the account as counted, folded, so
// each browser became known for the victim and login-failures-account (50
// from everyone in 15 minutes) stopped holding it: 70 guesses reached the
// origin. A marker names the account as it was sent now: 50 reach it.
// Control: the victim's own browser, known for "rene-x", still logs in.
func TestOwnAccountSpelledLikeAVictimsMakesNoBrowserKnownForIt(t *testing.T) {
	for _, own := range []string{"rené-x", "Rene-x"} {
		t.Run(own, func(t *testing.T) {
			w, clk, _ := shippedNode(t)
			const victimAccount = "rene-x"
			victim := w.caller("198.51.100.80", "Mozilla/5.0 (victim)")
			if !victim.page() || victim.login(victimAccount, "letmein-demo") != http.StatusOK {
				t.Fatal("the victim's login before the attack failed")
			}
			guesses := 0
			for i := range 14 {
				a := w.caller(fmt.Sprintf("198.18.%d.9", i), "attack/1.0") // a /24 each
				if !a.page() {
					t.Fatalf("client %d: no visitor cookie", i+1)
				}
				a.login(own, "letmein-demo")  // refused too once the account is locked: it shares the counter
				clk.Advance(12 * time.Second) // login-per-visitor's next one
				for range 5 {
					if a.login(victimAccount, "wrong") == http.StatusUnauthorized {
						guesses++
					}
				}
			}
			if guesses != 50 {
				t.Errorf("14 clients' wrong guesses at the victim that reached the origin: %d, want login-failures-account's 50", guesses)
			}
			if got := victim.login(victimAccount, "letmein-demo"); got != http.StatusOK {
				t.Errorf("the victim's known browser during the lock: got %d, want 200", got)
			}
			fresh := w.caller("192.0.2.80", "Mozilla/5.0 (fresh)")
			if !fresh.page() || fresh.login(victimAccount, "letmein-demo") != http.StatusTooManyRequests {
				t.Errorf("a fresh browser at the locked account: want 429")
			}
		})
	}
}

// TestKnownBrowserStaysKnownAtANewAddress is finding 5: a browser logs in
// to its account at .10 of a /24, then 105 logins from other hosts of the
// /24 fill login-per-network's hour, and the browser comes back from .11
// (a carrier's pool, a DHCP lease). Its marker used to name its address
// with its visitor ID, so it was known only at .10: 429. It names the ID
// alone now: 200. Control: a fresh browser at .12, the known browser at
// another account, and the attacker's next login are refused.
func TestKnownBrowserStaysKnownAtANewAddress(t *testing.T) {
	w, clk, _ := shippedNode(t)
	carol := w.caller("198.51.100.10", "Mozilla/5.0 (carol)")
	if !carol.page() || carol.login("carol@example.com", "letmein-demo") != http.StatusOK {
		t.Fatal("the browser's login at .10 failed")
	}
	clk.Advance(2 * time.Hour) // the /24's hour and the one before it (sliding_window) are empty
	through := 0
	for i := range 105 {
		a := w.caller(fmt.Sprintf("198.51.100.%d", 100+i%100), "spray/1.0")
		if a.login(fmt.Sprintf("spray-%03d@example.net", i), "wrong") == http.StatusUnauthorized {
			through++
		}
	}
	if through != 100 {
		t.Fatalf("the attacker's logins from the /24: %d reached the origin, want login-per-network's 100", through)
	}
	carol.ip = "198.51.100.11"
	if got := carol.login("carol@example.com", "letmein-demo"); got != http.StatusOK {
		t.Errorf("the known browser from .11 of its full /24: got %d, want 200 (known by its visitor ID)", got)
	}
	if got := carol.login("dave@example.com", "letmein-demo"); got != http.StatusTooManyRequests {
		t.Errorf("the known browser at another account: got %d, want 429 (known for carol only)", got)
	}
	fresh := w.caller("198.51.100.12", "Mozilla/5.0 (fresh)")
	if !fresh.page() || fresh.login("erin@example.com", "letmein-demo") != http.StatusTooManyRequests {
		t.Error("a fresh browser in the full /24: want 429")
	}
	if got := (w.caller("198.51.100.150", "spray/1.0")).login("spray-x@example.net", "wrong"); got != http.StatusTooManyRequests {
		t.Errorf("the attacker's 106th login from the /24: got %d, want 429", got)
	}
}

// idOnlyOTP makes the demo origin one that finds an OTP challenge by its
// ID alone (docs/policy.md, "otp_session"): a verify is checked against
// the phone the challenge's code was sent to, whatever phone it names.
type idOnlyOTP struct {
	mu     sync.Mutex
	phones map[string]string // challenge ID → the phone its code went to
}

func (o *idOnlyOTP) wrap(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		var f map[string]string
		_ = json.Unmarshal(ctx.PostBody(), &f)
		switch string(ctx.Path()) {
		case "/otp/send":
			next(ctx)
			var c otpChallenge
			if ctx.Response.StatusCode() == http.StatusOK && json.Unmarshal(ctx.Response.Body(), &c) == nil {
				o.mu.Lock()
				o.phones[c.ChallengeID] = f["phone"]
				o.mu.Unlock()
			}
			return
		case "/otp/verify":
			o.mu.Lock()
			phone, ok := o.phones[f["challenge_id"]]
			o.mu.Unlock()
			if ok {
				f["phone"] = phone
				b, _ := json.Marshal(f)
				ctx.Request.SetBody(b)
			}
		}
		next(ctx)
	}
}

// TestVerifyMakesKnownOnlyAPhoneACodeWasSentTo is finding 4, at an origin
// that finds a challenge by its ID alone: the attacker has codes sent to
// phones of its own in other blocks and verifies each naming a number of
// the victim's block, which became known without ever receiving a code
// and was then spared otp-send-per-range: 29 codes reached a block whose
// limit is 5 an hour. A phone is known only when a code was sent to it in
// the last 15 minutes now (known "verified-phone" requires "code-sent"):
// the block gets its 5. Controls: the owner of a phone of the block that
// verified its own code still gets codes; and the bound that is left, two
// hours on: an attacker that first has a code sent to a number of the block
// (counted on its range) and then verifies its own challenge naming it
// makes that number known, at most the range's 5 an hour.
func TestVerifyMakesKnownOnlyAPhoneACodeWasSentTo(t *testing.T) {
	origin := &idOnlyOTP{phones: map[string]string{}}
	w, clk, _ := shippedNodeWith(t, nodeOptions{origin: origin.wrap})
	const owned = "+12025550123"
	owner := w.caller("198.51.100.90", "Mozilla/5.0 (owner)")
	st, ch := owner.send(owned)
	if st != http.StatusOK || owner.verify(owned, ch) != http.StatusOK {
		t.Fatal("the owner's send and verify failed")
	}
	clk.Advance(2 * time.Hour)

	ip := 0
	next := func() *caller { ip++; return w.caller(fmt.Sprintf("198.18.%d.%d", ip/250, 1+ip%250), "pump/1.0") }
	npas := []string{"212", "303", "312", "404", "415", "503", "617", "713"}
	for i, npa := range npas {
		a := next()
		st, ch := a.send("+1" + npa + "5550100") // its own phone, in a block of its own
		if st != http.StatusOK {
			t.Fatalf("the attacker's send to its own phone %d: got %d", i+1, st)
		}
		if got := a.verify(fmt.Sprintf("+120255501%02d", 10+i), ch); got != http.StatusOK {
			t.Fatalf("the attacker's verify %d naming the victim's block: got %d, want 200 (the ID-only origin)", i+1, got)
		}
	}
	codes := 0
	for i := range npas {
		for range 3 {
			if st, _ := next().send(fmt.Sprintf("+120255501%02d", 10+i)); st == http.StatusOK {
				codes++
			}
		}
	}
	for j := range 10 {
		if st, _ := next().send(fmt.Sprintf("+120255501%02d", 60+j)); st == http.StatusOK {
			codes++
		}
	}
	if codes != 5 {
		t.Errorf("codes the attacker had sent into the victim's block: %d, want otp-send-per-range's 5", codes)
	}
	if own := owner.sends(owned, 3); own != "[200 200 200]" {
		t.Errorf("the owner's phone through its full block: got %v, want [200 200 200] (known: it verified its own code)", own)
	}

	// Two hours on (the range's sliding window forgets the hour before):
	// codes sent into the block, then verifies naming them.
	clk.Advance(2 * time.Hour)
	for i := range 5 {
		target := fmt.Sprintf("+120255502%02d", i)
		if st, _ := next().send(target); st != http.StatusOK {
			t.Fatalf("a send to %s: got %d, want 200 (the block's hour has room)", target, st)
		}
		a := next()
		_, ch := a.send(fmt.Sprintf("+1%s5550101", npas[i]))
		if got := a.verify(target, ch); got != http.StatusOK {
			t.Fatalf("the verify naming %s: got %d", target, got)
		}
	}
	if st, _ := next().send("+12025550205"); st != http.StatusTooManyRequests {
		t.Errorf("a sixth number of the block: got %d, want 429 (the range is full, and no code was sent to it)", st)
	}
	if st, _ := next().send("+12025550200"); st != http.StatusOK {
		t.Errorf("a number of the block a code was sent to before its verify: got %d, want 200 (known: the bound left, 5 an hour)", st)
	}
}
