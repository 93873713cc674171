package main

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/edge-gateway/edge/behaviour/ban"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// Attack classes on what a refused request writes (issue 24, a tester's
// findings): a refused request must not make the state that would refuse
// a bystander.

// attemptsFill is what refused-attempts-fill needs of the policy: the
// per-client rule of POST otpVerifyPath with count = "attempts" and its
// allowance, and the attempts rule keyed on the phone or the challenge
// alone whose network share (rules.Rule.NetworkKeys) is the least.
type attemptsFill struct {
	client    *rules.Rule
	perClient int64
	fill      *rules.Rule
}

// attemptsFillRules returns the rules refused-attempts-fill plays; ok is
// false when the policy lacks them, or when the per-client allowance
// alone would fill the network's share (then a neighbour may be refused
// by the attacker's allowed verifies, which the class cannot tell from
// the fault it looks for).
func (a *attackRun) attemptsFillRules() (f attemptsFill, why string, ok bool) {
	if node.Of(a.m.p).Store.Kind != "memory" {
		return f, "a network's share of a key budget is the memory store's", false
	}
	fields := map[string]string{"phone": "+12025550100", "challenge_id": "probe", "code": "000000"}
	v, err := a.m.decide(a.otpCanon(otpVerifyPath, modelProbe, fields))
	if err != nil || v.refused {
		return f, fmt.Sprintf("the policy %s refuses the canonical POST %s outright", a.p.policy, otpVerifyPath), false
	}
	now := time.Now()
	f.perClient = -1
	for _, c := range v.cons {
		if c.role < 0 || roleCeiling(c.role) || !c.op.Attempts {
			continue
		}
		cr := a.m.p.Rules[roleRule(c.role)]
		switch {
		case slices.Equal(cr.KeyNames, []string{"ip"}) && cr.IPv4Prefix == a.m.p.IPv4Prefix && cr.IPv6Prefix == a.m.p.IPv6Prefix:
			if al := allowance(c.op, now, now); f.perClient < 0 || al < f.perClient {
				f.client, f.perClient = cr, al
			}
		case (slices.Equal(cr.KeyNames, []string{"phone"}) || slices.Equal(cr.KeyNames, []string{"otp_session"})) && cr.NetworkKeys > 0:
			if f.fill == nil || cr.NetworkKeys < f.fill.NetworkKeys {
				f.fill = cr
			}
		}
	}
	switch {
	case f.client == nil || f.fill == nil:
		return f, fmt.Sprintf("no per-client rule of the policy %s with count = \"attempts\" beside an attempts rule keyed on the phone or otp_session with a network share holds POST %s", a.p.policy, otpVerifyPath), false
	case f.perClient >= int64(f.fill.NetworkKeys):
		return f, fmt.Sprintf("%s's %d allowed verifies alone fill a network's share of %s (%d keys)", f.client.Name, f.perClient, f.fill.Name, f.fill.NetworkKeys), false
	}
	return f, "", true
}

func refusedAttemptsFillRequests(a *attackRun) int64 {
	if f, _, ok := a.attemptsFillRules(); ok {
		return f.perClient + int64(f.fill.NetworkKeys)
	}
	return 0
}

// runRefusedAttemptsFill (a tester's finding F1 on issue 24): one client
// (one /64) spends its per-client allowance of verifies, each naming a new
// phone and challenge, then sends as many more as the fill rule's network
// share holds keys, each refused by the per-client rule. An attempts rule
// charges a refused request to the keys that exist and makes none, so the
// attacker's keys in the fill rule are those of its allowed verifies,
// fewer than its network's share: a neighbour in its /48 verifying its
// own phone is served (bound 0), and so is a user elsewhere. Before, every
// refused verify made a key in otp-verify-per-phone and
// otp-verify-per-session, filling the /48's share, and the neighbour's
// verify was refused (429). The gain is the verifies that reached the
// origin, held to the per-client allowance.
func runRefusedAttemptsFill(a *attackRun) error {
	f, why, ok := a.attemptsFillRules()
	if !ok {
		a.skip("refused-attempts-fill", "", why)
		return nil
	}
	site := a.v6Site()
	client := v6In(site, 0, 0, a.rng.Uint64()|1)
	other, near, err := a.elsewhereAndNear(v6In(site, 0xff, 0xff, a.rng.Uint64()|1), actOTP)
	if err != nil {
		return err
	}
	tc, cs, err := a.beginCast("refused-attempts-fill", "one-64", other, near)
	if err != nil {
		return err
	}
	refused := f.fill.NetworkKeys
	n := int(f.perClient) + refused
	phones := make([]string, n)
	ids := make([]string, n)
	base := a.tag()
	for i := range n {
		if phones[i], err = a.ownPhone(); err != nil {
			return err
		}
		ids[i] = fmt.Sprintf("attempts-%s-%d", base, i)
	}
	fields := func(i int) map[string]string {
		return map[string]string{"phone": phones[i], "challenge_id": ids[i], "code": otpGuess(i, "")}
	}
	// The allowed verifies first, one at a time, so that every one of the
	// rest is refused by the per-client rule.
	c := a.conn(netip.Addr{})
	defer c.close()
	for i := range int(f.perClient) {
		if _, err := tc.send(c, a.otpRequest(otpVerifyPath, client, "application/json", jsonBody(fields(i))), a.otpCanon(otpVerifyPath, client, fields(i))); err != nil {
			return err
		}
	}
	c.close()
	for i := int(f.perClient); i < n; i++ {
		v, err := a.m.decide(a.otpCanon(otpVerifyPath, client, fields(i)))
		if err != nil {
			return err
		}
		tc.verdicts = append(tc.verdicts, v)
	}
	fs, err := a.blast(refused, func(i int) *rawRequest {
		i += int(f.perClient)
		return a.otpRequest(otpVerifyPath, client, "application/json", jsonBody(fields(i)))
	})
	tc.last = time.Now()
	if err != nil {
		return err
	}
	tc.res.sent += fs.sent
	for s, k := range fs.statuses {
		tc.res.statuses[s] += k
	}
	return tc.end(cs, func(p string) bool { return p == otpVerifyPath }, fmt.Sprintf("verifies from one /64 that reached the origin, each naming a new phone and challenge: %d within %s's allowance, then %d refused by it (a network's share of %s: %d keys)",
		f.perClient, f.client.Name, refused, f.fill.Name, f.fill.NetworkKeys))
}

// networkFullBanRule returns the rule network-full-ban plays: a sensitive
// rule on POST /login keyed on the client alone with a ban on every
// sensitive route and a network share (rules.Rule.NetworkKeys); ok is
// false when the policy has none, or when another rule on the route
// counting a whole network refuses one network's logins before the
// share is full (the shipped login-per-network's 100 an hour against
// login-accounts-per-ip's 1,000 keys: the CI form sets the rule's own
// network_share, shortShareBan).
func (a *attackRun) networkFullBanRule() (r *rules.Rule, why string, ok bool) {
	if node.Of(a.m.p).Store.Kind != "memory" {
		return nil, "a network's share of a key budget is the memory store's", false
	}
	v, err := a.m.decide(a.loginCanon(modelProbe, loginFields(a.account("probe"), 0)))
	if err != nil || v.refused {
		return nil, fmt.Sprintf("the policy %s refuses the canonical POST /login outright", a.p.policy), false
	}
	now := time.Now()
	for _, cr := range a.m.p.Rules {
		if !slices.Contains(cr.Route.Methods(), "POST") || !slices.Contains(cr.Route.Paths(), "/login") || cr.DryRun {
			continue
		}
		if ban.Sensitive(cr) && cr.Sensitive && cr.NetworkKeys > 0 &&
			slices.Equal(cr.KeyNames, []string{"ip"}) && cr.IPv6Prefix == a.m.p.IPv6Prefix && (r == nil || cr.NetworkKeys < r.NetworkKeys) {
			r = cr
		}
	}
	if r == nil {
		return nil, fmt.Sprintf("no rule of the policy %s on POST /login keyed on the client with a ban on every sensitive route and a network share", a.p.policy), false
	}
	for _, c := range v.cons {
		if c.role < 0 || roleCeiling(c.role) {
			continue
		}
		cr := a.m.p.Rules[roleRule(c.role)]
		if slices.Equal(cr.KeyNames, []string{"ip"}) && cr.IPv6Prefix < a.m.p.IPv6Prefix {
			if al := allowance(c.op, now, now); al <= int64(r.NetworkKeys) {
				return nil, fmt.Sprintf("%s allows one network %d logins, not the %d that fill its share of %s and the bystander's", cr.Name, al, r.NetworkKeys+1, r.Name), false
			}
		}
	}
	return r, "", true
}

func networkFullBanRequests(a *attackRun) int64 {
	if r, _, ok := a.networkFullBanRule(); ok {
		return int64(r.NetworkKeys) + 3
	}
	return 0
}

// runNetworkFullBan (a tester's finding F2 on issue 24): one /48 fills its
// network's share of the ban rule's keys, one failing login from each of
// as many /64s, each within every limit. A cookieless neighbour in the
// /48 (another /64) logs in to its own account: the rule refuses its new
// key because the network holds its share (NetworkFull, 429), the one
// refusal its bound allows. It then has a code sent to its own phone and
// verifies it, a sensitive route its network's share of the login rule
// says nothing of: served (bound 0). Before, the share's refusal tripped
// the rule's ban like a limit's, and its ban_scope = "sensitive" refused
// the neighbour's send (429) for the ban's whole time. The gain is the
// attacker's logins that reached the origin, all of them within the
// policy.
func runNetworkFullBan(a *attackRun) error {
	r, why, ok := a.networkFullBanRule()
	if !ok {
		a.skip("network-full-ban", "", why)
		return nil
	}
	site := a.v6Site()
	near, err := a.freshAt(neighbour, v6In(site, 0xff, 0xff, a.rng.Uint64()|1), netip.Addr{}, actOTP)
	if err != nil {
		return err
	}
	near.override = func(q *rawRequest) (bool, string) {
		if q.target == "/login" {
			return true, fmt.Sprintf("its network holds its share of %s (%d keys)", r.Name, r.NetworkKeys)
		}
		return false, ""
	}
	tc, cs, err := a.beginCast("network-full-ban", "one-48", near)
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	for i := range r.NetworkKeys {
		client := v6In(site, byte(i>>8), byte(i), a.rng.Uint64()|1)
		q, fields := a.loginRequest("POST", "/login", a.account("share"), i)
		a.clientHeader(q, client)
		if _, err := tc.send(c, q, a.loginCanon(client, fields)); err != nil {
			return err
		}
	}
	c.close()
	gain, err := tc.reachedAll(func(p string) bool { return p == "/login" })
	if err != nil {
		return err
	}
	// The neighbour, cookieless: its login, then its own phone's code.
	tc.cast = cs
	bc := near.conn(a)
	defer bc.close()
	q, canon := near.login(a)
	if _, _, err := cs.actSend(near, bc, q, &canon, tc.verdicts); err != nil {
		return err
	}
	q, canon = near.send(a)
	ans, sent, err := cs.actSend(near, bc, q, &canon, tc.verdicts)
	if err != nil {
		return err
	}
	if id, code := otpChallenge(ans.status, ans.body); sent && id != "" {
		q, canon := near.verify(a, id, code)
		if _, _, err := cs.actSend(near, bc, q, &canon, tc.verdicts); err != nil {
			return err
		}
	}
	tc.finish(gain, fmt.Sprintf("failing logins from %d /64s of one /48, one each, that reached the origin: the /48's share of %s", r.NetworkKeys, r.Name))
	return nil
}
