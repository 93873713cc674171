package main

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/nat"
)

// The account-spelling class: one account written every way an origin's
// identity provider reads as that account. An identity provider compares
// login identifiers after trimming white space, NFKC and Unicode case
// folding (RFC 8265's UsernameCaseMapped does width mapping and case
// folding; Keycloak, Auth0 and case-insensitive database collations fold
// case), and a mail provider delivers aliases of one address to one inbox
// (Gmail ignores dots and "+tag" and answers at googlemail.com too). An
// edge that counted the bytes as sent would give every spelling a fresh
// budget on the account's rules.

// accountSpelling is one way of writing an account.
type accountSpelling struct {
	name  string // "upper-case", "full-width"
	value string // as sent in the body
}

// accountVictimPrefix begins every victim account of the login case: it
// holds "ss", for the ß spellings.
const accountVictimPrefix = "strasse-"

// loginAccountSpellings returns the spellings of victim, a lower-case
// ASCII account of letters, digits and "-" beginning with "strasse", that
// an identity provider comparing NFKC case folded forms, white space
// trimmed, reads as victim. The first is victim itself.
func loginAccountSpellings(victim string) []accountSpelling {
	ss := strings.Replace(victim, "ss", "ß", 1) // straße-…
	upper := strings.ToUpper(victim)
	return []accountSpelling{
		{"as-is", victim},
		{"upper-case", upper},
		{"title-case", strings.ToUpper(victim[:1]) + victim[1:]},
		{"sharp-s", ss}, // ß folds to ss
		{"sharp-s-upper-case", strings.ToUpper(ss[:4]) + "ß" + strings.ToUpper(ss[6:])}, // STRAßE-…
		{"capital-sharp-s", strings.Replace(upper, "SS", "\u1e9e", 1)},                  // ẞ (U+1E9E) folds to ss
		{"leading-space", " " + victim},
		{"trailing-space", victim + " "},
		{"tabs", "\t" + victim + "\t"},
		{"no-break-space", "\u00a0" + victim},
		{"em-space", victim + "\u2003"},
		{"ideographic-space", "\u3000" + victim + "\u3000"},
		{"full-width", mapRunes(victim, fullWidth)},
		{"full-width-upper-case", mapRunes(upper, fullWidth)},
		{"long-s", strings.ReplaceAll(victim, "s", "\u017f")}, // ſ: NFKC s
		{"st-ligature", "\ufb06" + victim[2:]},                // ﬆ: NFKC st
		{"long-s-t-ligature", "\ufb05" + victim[2:]},          // ﬅ: NFKC st
		{"mathematical-bold", mapRunes(victim, mathBold)},     // 𝐬𝐭𝐫…: NFKC plain
		{"circled", mapRunes(victim, circled)},                // ⓢⓣⓡ…: NFKC plain
		{"full-width-in-spaces", "  " + mapRunes(strings.Replace(upper, "SS", "\u1e9e", 1), fullWidth) + "\u3000"},
	}
}

// gmailSpellings returns the addresses Gmail delivers to local@gmail.com
// (local lower-case letters and digits, at least 4), each also read as
// one account once case, width and white space are normalised. The first
// is the address itself.
func gmailSpellings(local string) []accountSpelling {
	dotted := local[:1] + "." + local[1:]
	spaced := local[:1] + "." + local[1:2] + "." + local[2:3] + "." + local[3:]
	return []accountSpelling{
		{"as-is", local + "@gmail.com"},
		{"dot", dotted + "@gmail.com"},
		{"dots", spaced + "@gmail.com"},
		{"plus-tag", local + "+attacks@gmail.com"},
		{"two-plus-tags", local + "+a+b@gmail.com"},
		{"googlemail", local + "@googlemail.com"},
		{"dot-plus-tag-googlemail", dotted + "+1@googlemail.com"},
		{"mixed-case", strings.ToUpper(local[:2]) + local[2:] + "@Gmail.com"},
		{"upper-case", strings.ToUpper(local + "@googlemail.com")},
		{"surrounding-space", " " + local + "@gmail.com\u3000"},
		{"full-width-local", mapRunes(local, fullWidth) + "@gmail.com"},
		{"full-width-domain", local + "@" + mapRunes("gmail.com", fullWidth)},
		{"everything", " " + mapRunes(strings.ToUpper(dotted), fullWidth) + "+Tag@GoogleMail.COM "},
	}
}

// mapRunes returns s with each rune mapped by f.
func mapRunes(s string, f func(rune) rune) string { return strings.Map(f, s) }

// fullWidth maps printable ASCII to its full-width form (U+FF01-FF5E).
func fullWidth(r rune) rune {
	if '!' <= r && r <= '~' {
		return r - '!' + '\uff01'
	}
	return r
}

// mathBold maps ASCII letters and digits to MATHEMATICAL BOLD (U+1D400,
// U+1D41A, U+1D7CE).
func mathBold(r rune) rune {
	switch {
	case 'a' <= r && r <= 'z':
		return r - 'a' + 0x1d41a
	case 'A' <= r && r <= 'Z':
		return r - 'A' + 0x1d400
	case '0' <= r && r <= '9':
		return r - '0' + 0x1d7ce
	}
	return r
}

// circled maps lower-case letters and digits to their circled forms
// (U+24D0, U+24EA, U+2460).
func circled(r rune) rune {
	switch {
	case 'a' <= r && r <= 'z':
		return r - 'a' + 0x24d0
	case r == '0':
		return 0x24ea
	case '1' <= r && r <= '9':
		return r - '1' + 0x2460
	}
	return r
}

// accountMintFetches is how many visitor IDs the login case asks for: the
// policy's mint_limit, so that no visitor budget holds its guesses.
func (a *attackRun) accountMintFetches() int {
	if v := nat.ConfigOf(a.m.p); v != nil {
		return int(v.MintLimit)
	}
	return 0
}

func accountSpellingRequests(a *attackRun) int64 {
	return int64(a.accountMintFetches() + len(loginAccountSpellings(accountVictimPrefix+"00000000")) +
		len(gmailSpellings("jdoe00000000")))
}

// runAccountSpelling: every spelling of one account counts as that
// account (docs/attacks.md). The login case is one client guessing at one
// victim account in every spelling, each guess once, from visitor IDs it
// collected first (the mint budget's, from a path no rule limits), so
// that no visitor budget holds it and the account rules must:
// login-failures-account-client allows 5 failures per account and client
// across all spellings. The signup case is one client signing up one
// Gmail inbox under every address Gmail delivers to it: signup-per-email
// (account_aliases) allows 3.
func runAccountSpelling(a *attackRun) error {
	client := a.v6Client()
	victim := fmt.Sprintf("%s%08x", accountVictimPrefix, a.rng.Uint32())
	keyed, err := a.loginKeyedOnAccount("account-spelling", "login", client, victim)
	if err != nil {
		return err
	}
	if keyed {
		// The attack spends the address's mint budget: the known browser
		// behind it, a new one, and the account's owner from its own
		// address must all still log in.
		cs, err := a.castAround(client, netip.Addr{}, actLogin, actLogin)
		if err != nil {
			return err
		}
		owner := a.ownerOfAccount(victim, "username")
		if err := cs.add(owner); err != nil {
			return err
		}
		if err := a.accountLoginCase(client, victim, cs); err != nil {
			return err
		}
	}

	client = a.v6Client()
	local := fmt.Sprintf("jdoe%08x", a.rng.Uint32())
	canon := local + "@gmail.com"
	_, sv := a.signupAs(client, client, canon, canon)
	v, err := a.m.decide(sv)
	if err != nil {
		return err
	}
	if !a.keysOnAccount(v) {
		a.skip("account-spelling", "signup", fmt.Sprintf("no rule of the policy %s keys POST /signup on the account or the email (identity { account, email })", a.p.policy))
		return nil
	}
	cs, err := a.castAround(client, netip.Addr{}, actLogin, actSignup)
	if err != nil {
		return err
	}
	return a.simpleCaseOn("account-spelling", "signup", gmailSpellings(local), func(s accountSpelling) (*rawRequest, canonReq) {
		return a.signupAs(client, client, s.value, canon)
	}, "signups of "+canon+" that reached the origin, one in each of %d spellings from one client", cs)
}

// loginKeyedOnAccount reports whether a rule of the policy keys a login
// at victim from client on the account, and skips class/name, saying so,
// when none does.
func (a *attackRun) loginKeyedOnAccount(class, name string, client netip.Addr, victim string) (bool, error) {
	v, err := a.m.decide(a.loginCanon(client, loginFields(victim, 0)))
	if err != nil {
		return false, err
	}
	if !a.keysOnAccount(v) {
		a.skip(class, name, fmt.Sprintf("no rule of the policy %s keys POST /login at %s on the account (identity { account })", a.p.policy, a.p.host))
		return false, nil
	}
	return true, nil
}

// keysOnAccount reports whether a rule holding v keys on the account, or
// on the email (normalised as the account is: the signup rule's).
func (a *attackRun) keysOnAccount(v canonVerdict) bool {
	for _, c := range v.cons {
		if names := a.m.p.Rules[c.ruleIndex()].KeyNames; c.role >= 0 && (slices.Contains(names, "account") || slices.Contains(names, "email")) {
			return true
		}
	}
	return false
}

// accountLoginCase runs the login case: visitor IDs first, then one guess
// at victim in each spelling, the IDs taken in turn.
func (a *attackRun) accountLoginCase(client netip.Addr, victim string, cs *cast) error {
	tc, err := a.begin("account-spelling", "login")
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	ids, err := tc.fetchIDs(c, client, a.accountMintFetches(), nil)
	if err != nil {
		return err
	}
	spellings := loginAccountSpellings(victim)
	var through []string
	for i, s := range spellings {
		r := a.request(fasthttp.MethodPost, "/login")
		a.clientHeader(r, client)
		r.add("Content-Type", "application/json")
		r.body = jsonBody(loginFields(s.value, i))
		canon := a.loginCanon(client, loginFields(victim, i))
		if len(ids) > 0 {
			canon.visitor = ids[i%len(ids)]
			r.add("Cookie", a.cookie+"="+canon.visitor)
		}
		_, _, ok, err := tc.sendTagged(c, r, canon)
		if err != nil {
			return err
		}
		if ok {
			through = append(through, s.name)
		}
	}
	gain, err := tc.reachedAll(func(p string) bool { return p == "/login" })
	if err != nil {
		return err
	}
	if gain != int64(len(through)) {
		return fmt.Errorf("%s: the origin counted %d logins but saw %d of the case's tags: other traffic reached it; run again on a quiet node", tc.res.name, gain, len(through))
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	tc.finish(gain, fmt.Sprintf("wrong guesses at %s that reached the origin, one in each of %d spellings from one client with %d visitor IDs (%s)",
		victim, len(spellings), len(ids), strings.Join(through, ", ")))
	return nil
}

// fetchIDs asks for n pages at mintTarget (a path no rule limits) from
// client, uncounted, and returns the distinct visitor IDs the edge set on
// them, in order; mints, when not nil, gets each request's verdict (its
// mint budget op).
func (tc *tcase) fetchIDs(c *rawConn, client netip.Addr, n int, mints *[]canonVerdict) ([]string, error) {
	a := tc.a
	var ids []string
	for range n {
		r := a.request(fasthttp.MethodGet, mintTarget)
		a.clientHeader(r, client)
		if mints != nil {
			v, err := a.m.decide(canonReq{method: fasthttp.MethodGet, path: mintTarget, host: a.p.host, client: a.m.counted(client)})
			if err != nil {
				return nil, err
			}
			*mints = append(*mints, v)
		}
		ans, err := tc.sendUncounted(c, r)
		if err != nil {
			return nil, err
		}
		if ans.cookie != "" && !slices.Contains(ids, ans.cookie) {
			ids = append(ids, ans.cookie)
		}
	}
	return ids, nil
}

// simpleCaseOn sends one request per spelling, built by mk, on one
// connection, and counts every one that reached the origin, then plays
// the cast; note is the gain's note, with %d the number of spellings.
func (a *attackRun) simpleCaseOn(class, name string, spellings []accountSpelling, mk func(accountSpelling) (*rawRequest, canonReq), note string, cs *cast) error {
	tc, err := a.begin(class, name)
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	for _, s := range spellings {
		r, canon := mk(s)
		if _, err := tc.send(c, r, canon); err != nil {
			return err
		}
	}
	return tc.end(cs, nil, fmt.Sprintf(note, len(spellings)))
}
