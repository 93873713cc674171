package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"
)

// Attack classes on who the account is (issue 24): identity sources that
// disagree, and accents that the origin's database folds.
//
// An origin that logs people in by email acts on the email of a body that
// also carries a username, whatever the edge counted; so the canonical
// request of an identity-conflict case names the email alone (the request
// the attacker means), and an edge that counted the username would give
// every new username a fresh budget at the victim's inbox. An origin whose
// database compares accounts accent-insensitively (MySQL 8's default
// utf8mb4_0900_ai_ci, SQL Server's _CI_AI collations) reads alicé, ÀLICE
// and alice as one account; the canonical request names the account as
// its owner writes it.

// Requests per case.
const (
	conflictOneIP   = 12 // one client: over the per-account-and-client failures, within its visitor budgets
	conflictManyIPs = 60 // one each from new clients: over the per-account failures
	conflictSignups = 10 // one client, one inbox: over the per-inbox signups
	// conflictIDs is how many visitor IDs a one-client case collects from
	// the mint budget, so that with the cookieless bucket no visitor
	// budget of 5 holds its 12 logins (4 each).
	conflictIDs = 2
)

func identityConflictRequests(*attackRun) int64 {
	return conflictIDs + conflictOneIP + conflictManyIPs + conflictSignups
}

// runIdentityConflict: a login body with a new username and the victim's
// email, from one client (bound: the per-account-and-client failures, 5)
// and from many (the per-account failures, 50); signups of one inbox
// under new usernames (the per-inbox signups, 3). The policy must count
// the email however many usernames come with it.
func runIdentityConflict(a *attackRun) error {
	client := a.v6Client()
	victim := a.account("victim") + "@example.com"
	if why, err := a.conflictSkip(client, victim); err != nil || why != "" {
		if why != "" {
			a.skip("identity-conflict", "", why)
		}
		return err
	}
	wrong := func(victim string, i int) (map[string]string, map[string]string) {
		sent := map[string]string{"username": a.account("conflict"), "email": victim, "password": fmt.Sprintf("wrong-%d", i)}
		return sent, map[string]string{"email": victim, "password": sent["password"]}
	}

	// One client: the known browser behind it, a new one, and the inbox's
	// owner log in after (a ban the usernames tripped must not fall on
	// them).
	cs, err := a.castAround(client, netip.Addr{}, actLogin, actLogin)
	if err != nil {
		return err
	}
	if err := cs.add(a.ownerOfAccount(victim, "email")); err != nil {
		return err
	}
	if err := a.visitorsCase("identity-conflict", "login-one-ip", client, conflictIDs, conflictOneIP, func(i int) (*rawRequest, canonReq) {
		sent, canon := wrong(victim, i)
		return a.jsonRequest(fasthttp.MethodPost, "/login", client, sent), a.loginCanon(client, canon)
	}, cs, "wrong guesses at "+victim+" that reached the origin, each with a new username beside it, from one client"); err != nil {
		return err
	}

	// Many clients, one login each, at a victim of its own: the first
	// case's failures count on the first victim's account for 15 minutes.
	victim = a.account("victim") + "@example.com"
	if cs, err = a.newCast(a.ownerOfAccount(victim, "email")); err != nil {
		return err
	}
	if err := a.simpleCase("identity-conflict", "login-many-ips", conflictManyIPs, func(i int) (*rawRequest, canonReq) {
		c := a.v6Client()
		sent, canon := wrong(victim, i)
		return a.jsonRequest(fasthttp.MethodPost, "/login", c, sent), a.loginCanon(c, canon)
	}, cs); err != nil {
		return err
	}

	// One inbox under many usernames.
	client = a.v6Client()
	inbox := a.email()
	if cs, err = a.castAround(client, netip.Addr{}, actLogin, actSignup); err != nil {
		return err
	}
	return a.simpleCase("identity-conflict", "signup-one-inbox", conflictSignups, func(int) (*rawRequest, canonReq) {
		r, canon := a.signupAs(client, client, inbox, inbox)
		r.body = jsonBody(map[string]string{"username": a.account("conflict"), "email": inbox})
		return r, canon
	}, cs)
}

// conflictSkip says why the class cannot run on the policy: it needs the
// account read from both a username and an email field.
func (a *attackRun) conflictSkip(client netip.Addr, email string) (string, error) {
	for _, f := range []string{"username", "email"} {
		v, err := a.m.decide(a.loginCanon(client, map[string]string{f: email, "password": "x"}))
		if err != nil {
			return "", err
		}
		if !a.keysOnAccount(v) {
			return fmt.Sprintf("no rule of the policy %s keys a login that names its account in %q on the account (identity { account } lists no such source): no two sources to disagree", a.p.policy, f), nil
		}
	}
	return "", nil
}

// jsonRequest is method target from client with fields as a JSON body.
func (a *attackRun) jsonRequest(method, target string, client netip.Addr, fields map[string]string) *rawRequest {
	r := a.request(method, target)
	a.clientHeader(r, client)
	r.add("Content-Type", "application/json")
	r.body = jsonBody(fields)
	return r
}

// visitorsCase runs n logins from one client spread over its cookieless
// bucket and ids visitor IDs it collects first (from a path no rule
// limits: the mint budget's), in turn, so that no visitor budget holds
// them and the account rules must; mk builds login i. The gain is the
// logins that reached the origin.
func (a *attackRun) visitorsCase(class, name string, client netip.Addr, ids, n int, mk func(i int) (*rawRequest, canonReq), cs *cast, note string) error {
	tc, err := a.begin(class, name)
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	minted, err := tc.fetchIDs(c, client, ids, nil)
	if err != nil {
		return err
	}
	got := append([]string{""}, minted...) // the cookieless bucket first
	for i := range n {
		r, canon := mk(i)
		if id := got[i%len(got)]; id != "" {
			r.add("Cookie", a.cookie+"="+id)
			canon.visitor = id
		}
		if _, err := tc.send(c, r, canon); err != nil {
			return err
		}
	}
	return tc.end(cs, func(p string) bool { return p == "/login" }, fmt.Sprintf("%s, with %d visitor IDs and the cookieless bucket", note, len(got)-1))
}

// accentVictimLocal begins every accent-folding victim: letters that take
// accents.
const accentVictimLocal = "alice-"

// accentSpellings returns spellings of victim ("alice-…@example.com",
// lower-case ASCII) that a database comparing accounts at the Unicode
// collation's primary strength (accents and case ignored: MySQL 8's
// utf8mb4_0900_ai_ci, SQL Server's _CI_AI) reads as victim, each but the
// first one that NFKC and case folding alone keep apart from it. The first
// is victim itself.
func accentSpellings(victim string) []accountSpelling {
	rest := strings.TrimPrefix(victim, "alice")
	upper := strings.ToUpper(rest)
	return []accountSpelling{
		{"as-is", victim},
		{"e-acute", "alic\u00e9" + rest},                 // alicé
		{"e-combining-acute", "alice\u0301" + rest},      // e + U+0301: NFKC composes it to é
		{"a-grave-upper-case", "\u00c0LICE" + upper},     // ÀLICE
		{"a-acute", "\u00e1lice" + rest},                 // álice
		{"i-diaeresis", "al\u00efce" + rest},             // alïce
		{"i-diaeresis-upper-case", "AL\u00cfCE" + upper}, // ALÏCE
		{"a-circumflex", "\u00e2lice" + rest},            // âlice
		{"a-ring", "\u00e5lice" + rest},                  // ålice
		{"a-macron", "\u0101lice" + rest},                // ālice
	}
}

// accentIDs is how many visitor IDs accent-folding collects: with the
// cookieless bucket, 5 logins each over its 10 spellings.
const accentIDs = 1

func accentFoldingRequests(*attackRun) int64 {
	return accentIDs + int64(len(accentSpellings("alice-0@example.com")))
}

// runAccentFolding: failures at every accented spelling of one account
// count as that account's, from one client: the per-account-and-client
// failures allow 5 (issue 24, §2).
func runAccentFolding(a *attackRun) error {
	return a.spellingsCase("accent-folding", accentIDs, accentSpellings, "accented spellings")
}

// spellingsCase plays a case of name: wrong guesses at one account from
// one client, one in each of the spellings spell gives of it, collecting
// ids visitor IDs; what reached the origin beyond the per-account-and-
// client failures' 5 is the gain. The account's owner and the browsers
// around the client are its bystanders. what names the spellings in the
// case's line.
func (a *attackRun) spellingsCase(name string, ids int, spell func(string) []accountSpelling, what string) error {
	client := a.v6Client()
	victim := fmt.Sprintf("%s%08x@example.com", accentVictimLocal, a.rng.Uint32())
	if keyed, err := a.loginKeyedOnAccount(name, "", client, victim); err != nil || !keyed {
		return err
	}
	cs, err := a.castAround(client, netip.Addr{}, actLogin, actLogin)
	if err != nil {
		return err
	}
	if err := cs.add(a.ownerOfAccount(victim, "username")); err != nil {
		return err
	}
	spellings := spell(victim)
	return a.visitorsCase(name, "login", client, ids, len(spellings), func(i int) (*rawRequest, canonReq) {
		r := a.jsonRequest(fasthttp.MethodPost, "/login", client, loginFields(spellings[i].value, i))
		return r, a.loginCanon(client, loginFields(victim, i))
	}, cs, fmt.Sprintf("wrong guesses at %s that reached the origin, one in each of %d %s", victim, len(spellings), what))
}

// collationSpellings returns 16 spellings of victim ("alice-…@example.com",
// lower-case ASCII) that a database comparing accounts at the Unicode
// collation's primary strength (MySQL 8's utf8mb4_0900_ai_ci, SQL
// Server's _CI_AI) reads as victim, beyond accents on letters: what the
// collation ignores (enclosing marks, the ypogegrammeni, variation
// selectors, tags, stacked marks) and what it reads as a plain letter (a
// combining small letter, a negative squared one, full width). The first
// is victim itself.
func collationSpellings(victim string) []accountSpelling {
	rest := strings.TrimPrefix(victim, "alice")
	upper := strings.ToUpper(rest)
	return []accountSpelling{
		{"as-is", victim},
		{"enclosing-keycap", "ali\u20e3ce" + rest},
		{"ypogegrammeni", "alic\u0345e" + rest},
		{"variation-selector-17", "ali\U000e0100ce" + rest},
		{"variation-selector-256-upper-case", "ALI\U000e01efCE" + upper},
		{"mongolian-selector", "ali\u180dce" + rest},
		{"tag-letter", "ali\U000e0041ce" + rest},
		{"combining-small-i", "al\u0365ce" + rest},
		{"combining-small-e", "alic\u0364" + rest},
		{"negative-squared-l", "a\U0001f15bice" + rest},
		{"stacked-marks", "a\u0328\u0330\u20e3lice" + rest},
		{"enclosing-circle", "alic\u20dde" + rest},
		{"full-width-keycap", "ａｌｉ\u20e3ｃｅ" + rest},
		{"grapheme-joiner-keycap", "al\u034fi\u20e3ce" + rest},
		{"combining-small-c-upper-case", "ALI\u0368E" + upper},
		{"negative-circled-a", "\U0001f150lice" + rest},
	}
}

// collationIDs is how many visitor IDs collation-folding collects: with
// the cookieless bucket, 4 logins each over its 16 spellings.
const collationIDs = 3

func collationFoldingRequests(*attackRun) int64 {
	return collationIDs + int64(len(collationSpellings("alice-0@example.com")))
}

// runCollationFolding: failures at 16 spellings of one account that the
// collation reads as it, beyond accents (collationSpellings), count as
// that account's, from one client: the per-account-and-client failures
// allow 5 (issue 24, §2; before the normal form was the collation key's
// spelling, 14 of them were accounts of their own).
func runCollationFolding(a *attackRun) error {
	return a.spellingsCase("collation-folding", collationIDs, collationSpellings, "spellings the collation reads as it")
}
