package main

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/behaviour/ban"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/otp"
	"github.com/edge-gateway/edge/rules"
)

// Attack classes whose harm is the collateral (issue 24, §3): the attacker
// gains little or nothing at the origin; what it wants is the defences
// turned against the people behind its address, in its network, in its
// numbering block. Each is played as the issue found it, with the
// bystanders it hurt.

// mintingLogins is how many cookieless logins minting sends after
// spending the mint budget: over the cookieless bucket's burst of 5.
const mintingLogins = 6

func mintingRequests(a *attackRun) int64 {
	if v := nat.ConfigOf(a.m.p); v != nil {
		return v.MintLimit + mintingLogins
	}
	return 0
}

// runMinting (harm c): a NAT'd IPv4 address fetches mint_limit pages, dropping
// every cookie the edge sets, then fails cookieless logins until the
// cookieless bucket refuses it. A new browser behind that address must
// still get a visitor cookie of its own and log in; the known browser
// behind it logs in with its own.
func runMinting(a *attackRun) error {
	vc := nat.ConfigOf(a.m.p)
	if a.noVisitor("minting") {
		return nil
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	client := v4In(a.v4Net(), 7) // a NAT's public IPv4 address
	tc, cs, err := a.beginAround("minting", "nat-address", client, netip.Addr{}, actLogin, actLogin)
	if err != nil {
		return err
	}
	var mints []canonVerdict
	ids, err := tc.fetchIDs(c, client, int(vc.MintLimit), &mints)
	if err != nil {
		return err
	}
	for i := range mintingLogins {
		r, f := a.loginRequest(fasthttp.MethodPost, "/login", a.sprayed(i), i)
		a.clientHeader(r, client)
		canon := a.loginCanon(client, f)
		v, err := a.m.decide(canon)
		if err != nil {
			return err
		}
		mints = append(mints, v)
		if _, err := tc.send(c, r, canon); err != nil {
			return err
		}
	}
	return tc.finishLogins(cs, "cookieless logins that reached the origin, after fetching "+fmt.Sprint(vc.MintLimit)+" pages and dropping each cookie",
		mints, len(ids), "minting/visitor-ids")
}

// finishLogins ends a case whose gain is its logins that reached the
// origin: it plays the cast, finishes the case with note, and records the
// case's mint line, mintName: the ids distinct visitor IDs the edge set on
// the cookieless requests whose verdicts are mints.
func (tc *tcase) finishLogins(cs *cast, note string, mints []canonVerdict, ids int, mintName string) error {
	gain, err := tc.reachedAll(func(p string) bool { return p == "/login" })
	if err != nil {
		return err
	}
	first, last := tc.first, tc.last
	if err := tc.play(cs); err != nil {
		return err
	}
	tc.finish(gain, note)
	bound, op, _ := mintBound(mints, first, last)
	tc.a.mintResult(mintName, int64(len(mints)), int64(ids), bound, op, tc.res.name)
	return nil
}

// noVisitor skips class, and says so, when the policy has no visitor
// block.
func (a *attackRun) noVisitor(class string) bool {
	if nat.ConfigOf(a.m.p) != nil {
		return false
	}
	a.skip(class, "", fmt.Sprintf("the policy %s has no visitor block", a.p.policy))
	return true
}

// modelProbe is the client of the model's probes: requests decided, never
// sent.
var modelProbe = netip.MustParseAddr("2001:db8:ffff::1")

// banRule returns the rule whose ban the ban class trips, and ok: an
// enforcing rule on POST /login counting distinct failing accounts per IP
// with a ban over the sensitive routes.
func (a *attackRun) banRule() (*rules.Rule, bool) {
	v, err := a.m.decide(a.loginCanon(modelProbe, loginFields("probe", 0)))
	if err != nil || v.refused {
		return nil, false
	}
	for _, i := range v.rules {
		r := a.m.p.Rules[i]
		if ban.Sensitive(r) && r.Distinct != nil && slices.Contains(r.KeyNames, "ip") {
			return r, true
		}
	}
	return nil, false
}

func banRequests(a *attackRun) int64 {
	if r, ok := a.banRule(); ok {
		return banIDs + r.Limit + 2
	}
	return 0
}

// banIDs is how many visitor IDs the ban class collects: with the
// cookieless bucket, no visitor budget of 5 holds its 12 logins.
const banIDs = 2

// runBan (harm d): one address fails logins at one new account after
// another until the credential-stuffing rule refuses it and bans the
// address from every sensitive route. The known browser behind it (its
// cookie, a login and a verify before) and a new one must still log in,
// have codes sent and verified, and sign up: the ban falls on what the
// attacker controls, the address's cookieless bucket and the visitors
// that failed.
func runBan(a *attackRun) error {
	r, ok := a.banRule()
	if !ok {
		a.skip("ban", "", fmt.Sprintf("no rule of the policy %s counts distinct failing accounts on POST /login per IP with a ban over the sensitive routes (ban_scope = \"sensitive\")", a.p.policy))
		return nil
	}
	client := a.v6Client()
	all := actLogin | actSignup
	if otp.IdentityOf(a.m.p) != nil && len(otp.IdentityOf(a.m.p).Phone) > 0 {
		all |= actOTP
	}
	cs, err := a.castAround(client, netip.Addr{}, all, all)
	if err != nil {
		return err
	}
	n := int(r.Limit) + 2
	return a.visitorsCase("ban", "failed-logins", client, banIDs, n, func(i int) (*rawRequest, canonReq) {
		f := loginFields(a.sprayed(i), i)
		return a.jsonRequest(fasthttp.MethodPost, "/login", client, f), a.loginCanon(client, f)
	}, cs, fmt.Sprintf("failed logins at %d new accounts that reached the origin (%s bans the address at the %dth)", n, r.Name, r.Limit+1))
}

// networkRule returns the least allowance of an enforcing network rule
// (keyed on "ip" at a prefix wider than the client's) that holds req, and
// its name.
func (a *attackRun) networkRule(req canonReq) (int64, string, error) {
	v, err := a.m.decide(req)
	if err != nil {
		return 0, "", err
	}
	now := time.Now()
	best, name := int64(-1), ""
	for _, c := range v.cons {
		if !a.networkRole(c.role) {
			continue
		}
		if al := allowance(c.op, now, now); best < 0 || al < best {
			best, name = al, c.name
		}
	}
	return best, name, nil
}

// lockoutExtra is how many requests a lockout class sends beyond the
// counter's allowance.
const lockoutExtra = 5

func networkLockoutRequests(a *attackRun) int64 {
	n, _, err := a.networkRule(a.loginCanon(netip.MustParseAddr("198.18.0.1"), loginFields("probe", 0)))
	if err != nil || n < 0 {
		return 0
	}
	return n + lockoutExtra
}

// runNetworkLockout (harm e): logins from many hosts of one IPv4 /24, a
// new account each, until the per-network rule refuses the /24. The
// known browser behind one of those hosts must still log in; the fresh
// browser behind it and a new one elsewhere in the /24 are held with the
// attacker, as the rule means (they are no one the edge knows).
func runNetworkLockout(a *attackRun) error {
	net := a.v4Net()
	n, rule, err := a.networkRule(a.loginCanon(v4In(net, 1), loginFields("probe", 0)))
	if err != nil {
		return err
	}
	if n < 0 {
		a.skip("network-lockout", "", fmt.Sprintf("no rule of the policy %s holds POST /login at %s per network (key = [\"ip\"] at an ipv4_prefix wider than the client's)", a.p.policy, a.p.host))
		return nil
	}
	if n+lockoutExtra > 240 {
		a.skip("network-lockout", "", fmt.Sprintf("%s allows a /24 %d logins: more than its 240 hosts can send one each", rule, n))
		return nil
	}
	cs, err := a.castAround(v4In(net, 1), v4In(net, 250), actLogin, actLogin)
	if err != nil {
		return err
	}
	return a.loginCase("network-lockout", "one-24", int(n)+lockoutExtra, func(i int) netip.Addr {
		return v4In(net, byte(1+i))
	}, a.sprayed, "/login", cs)
}

// rangeRule returns the allowance of the enforcing range rule (keyed on
// phone_range) that holds a send to phone, and its name; -1 for none.
func (a *attackRun) rangeRule(phone string) (int64, string, error) {
	v, err := a.m.decide(a.otpCanon(otpSendPath, modelProbe, otpFields(phone)))
	if err != nil {
		return 0, "", err
	}
	now := time.Now()
	for _, c := range v.cons {
		if c.role >= 0 && slices.Contains(a.m.p.Rules[roleRule(c.role)].KeyNames, "phone_range") {
			return allowance(c.op, now, now), c.name, nil
		}
	}
	return -1, "", nil
}

func rangeLockoutRequests(a *attackRun) int64 {
	n, _, err := a.rangeRule("+12025550100")
	if err != nil || n < 0 {
		return 0
	}
	return n + lockoutExtra
}

// runRangeLockout (harm f): sends to numbers of one numbering block, each
// from a new client, until the per-range rule refuses the block. The owner
// of a phone of the block that verified before must still get its code
// and verify it; a phone of the block that never verified is held with
// the attacker.
func runRangeLockout(a *attackRun) error {
	b, ok, err := a.phoneBlock("range-lockout")
	if !ok {
		return err
	}
	n, rule, err := a.rangeRule(b.phones[0])
	if err != nil {
		return err
	}
	if n < 0 {
		a.skip("range-lockout", "", fmt.Sprintf("no rule of the policy %s holds POST %s per numbering range (key = [\"phone_range\"])", a.p.policy, otpSendPath))
		return nil
	}
	if int(n)+lockoutExtra+2 > len(b.phones) {
		a.skip("range-lockout", "", fmt.Sprintf("%s allows a range %d sends: more than a block of %d numbers can take", rule, n, len(b.phones)))
		return nil
	}
	owner := a.ownerOf(b.phones[len(b.phones)-1])
	fresh, err := a.freshAt(newPhone, a.v6Client(), netip.Addr{}, 0)
	if err != nil {
		return err
	}
	fresh.acts, fresh.phone = actOTP, b.phones[len(b.phones)-2]
	cs, err := a.newCast(owner, fresh)
	if err != nil {
		return err
	}
	return a.sendsCase("range-lockout", "one-block", b.phones[:n+lockoutExtra], "sends to "+b.rng+"…", cs)
}
