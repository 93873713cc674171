package main

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/behaviour/ban"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// Attack classes on the memory store's key budgets (issue 24): a network
// that fills a sensitive rule's budget of new keys turns the rule against
// everyone (harm a), and a flood of new keys on an ordinary rule must not
// evict a ban that still refuses (§1b).

// budgetRule returns the sensitive rule keyed on the phone alone that a
// send meets, with a key budget in the memory store, the flood that fills
// it (⌈1.1 × max_keys⌉ new phones) and how many sends one client may make
// (the least allowance of the per-client rules the send meets); ok is
// false when there is none.
func (a *attackRun) budgetRule() (r *rules.Rule, n int, perClient int64, ok bool) {
	if node.Of(a.m.p).Store.Kind != "memory" {
		return nil, 0, 0, false
	}
	v, err := a.m.decide(a.otpCanon(otpSendPath, modelProbe, otpFields("+12025550100")))
	if err != nil || v.refused {
		return nil, 0, 0, false
	}
	now := time.Now()
	perClient = -1
	for _, c := range v.cons {
		if c.role < 0 || roleCeiling(c.role) {
			continue
		}
		cr := a.m.p.Rules[roleRule(c.role)]
		switch {
		case slices.Equal(cr.KeyNames, []string{"phone"}) && cr.Sensitive && cr.MaxKeys > 0 && r == nil:
			r = cr
		case slices.Equal(cr.KeyNames, []string{"ip"}) && cr.IPv4Prefix == a.m.p.IPv4Prefix && cr.IPv6Prefix == a.m.p.IPv6Prefix:
			if al := allowance(c.op, now, now); perClient < 0 || al < perClient {
				perClient = al
			}
		}
	}
	if r == nil {
		return nil, 0, 0, false
	}
	n = (r.MaxKeys*attacksFloodTenths + 9) / 10
	if perClient <= 0 {
		perClient = int64(n)
	}
	return r, n, perClient, true
}

func keyBudgetFillRequests(a *attackRun) int64 {
	if _, n, _, ok := a.budgetRule(); ok {
		return int64(n)
	}
	return 0
}

// runKeyBudgetFill (harm a): new phones from many /64s of one /48, each
// /64 as many as its per-client limit allows, until the per-phone rule's
// key budget is full of live state. A user in another network sending to
// a new phone must not be refused (the network that filled its share is,
// 429, not everyone, 503); a user elsewhere in the attacker's /48 shares
// its network's share and may be refused. It runs last: on a store
// without fair shares it leaves the budget full for the rule's period.
func runKeyBudgetFill(a *attackRun) error {
	r, n, perClient, ok := a.budgetRule()
	if !ok {
		a.skip("key-budget-fill", "", fmt.Sprintf("no sensitive rule of the policy %s keys POST %s on the phone alone with a memory-store key budget (max_keys)", a.p.policy, otpSendPath))
		return nil
	}
	site := a.v6Site()
	if int64(n)/perClient >= 0xffff {
		a.skip("key-budget-fill", "", fmt.Sprintf("%d new phones at %d per /64 need more /64s than one /48 has", n, perClient))
		return nil
	}
	other, near, err := a.elsewhereAndNear(v6In(site, 0xff, 0xff, a.rng.Uint64()|1), actOTP)
	if err != nil {
		return err
	}
	near.override = func(req *rawRequest) (bool, string) {
		if req.target != otpSendPath {
			return false, ""
		}
		return true, fmt.Sprintf("its /48 sent %s's whole key budget of new phones: the network's share of it is full", r.Name)
	}
	tc, cs, err := a.beginCast("key-budget-fill", "one-48", other, near)
	if err != nil {
		return err
	}
	tc.expect503 = true
	phones := make([]string, n)
	clients := make([]netip.Addr, int64(n)/perClient+1)
	for j := range clients {
		clients[j] = v6In(site, byte(j>>8), byte(j), a.rng.Uint64()|1)
	}
	for i := range phones {
		if phones[i], err = a.ownPhone(); err != nil {
			return err
		}
		v, err := a.m.decide(a.otpCanon(otpSendPath, clients[int64(i)/perClient], otpFields(phones[i])))
		if err != nil {
			return err
		}
		tc.verdicts = append(tc.verdicts, v)
	}
	tc.first = time.Now()
	fs, err := a.blast(n, func(i int) *rawRequest {
		return a.otpRequest(otpSendPath, clients[int64(i)/perClient], "application/json", jsonBody(otpFields(phones[i])))
	})
	tc.last = time.Now()
	if err != nil {
		return err
	}
	tc.res.sent += fs.sent
	for s, k := range fs.statuses {
		tc.res.statuses[s] += k
	}
	return tc.end(cs, func(p string) bool { return p == otpSendPath }, fmt.Sprintf("sends to %d new phones from %d /64s of one /48 that reached the origin, in %s (%s keeps %d phones)",
		n, len(clients), fs.elapsed.Round(time.Millisecond), r.Name, r.MaxKeys))
}

// elsewhereAndNear are two new browsers acting on acts: one in a network
// no case uses, and a neighbour of the attacker's at near.
func (a *attackRun) elsewhereAndNear(near netip.Addr, acts act) (*bystander, *bystander, error) {
	o, err := a.freshAt(elsewhere, a.v6Client(), netip.Addr{}, acts)
	if err != nil {
		return nil, nil, err
	}
	n, err := a.freshAt(neighbour, near, netip.Addr{}, acts)
	return o, n, err
}

// blast sends n requests built by mk over attacksFloodConns connections,
// each as soon as the last on its connection was answered, and tallies
// the answers.
func (a *attackRun) blast(n int, mk func(i int) *rawRequest) (floodStats, error) {
	return a.parallel(n, func(c *rawConn, i int) (int, error) {
		ans, err := c.do(a.ctx, mk(i))
		return ans.status, err
	})
}

// evictionRule returns an ordinary rule with a ban on a small key budget
// keyed on "ip" (testdata/attacks-bans.hcl has one), the method and path
// its requests take; ok is false when the policy has none.
func (a *attackRun) evictionRule() (r *rules.Rule, method, path string, ok bool) {
	for _, cr := range a.m.p.Rules {
		if ban.Duration(cr) <= 0 || cr.Sensitive || cr.DryRun || cr.Action != rules.ActionLimit || cr.InFlight() ||
			!slices.Equal(cr.KeyNames, []string{"ip"}) || cr.MaxKeys <= 0 || cr.MaxKeys > evictionMaxKeys || cr.Period > evictionMaxPeriod {
			continue
		}
		ps := cr.Route.Paths()
		if len(ps) == 0 {
			continue
		}
		path = ps[0]
		if path[len(path)-1] == '*' { // a prefix: "/api/banned/*"
			path = path[:len(path)-1] + "attacks-ban"
		}
		method = fasthttp.MethodGet
		if ms := cr.Route.Methods(); len(ms) > 0 {
			method = ms[0]
		}
		return cr, method, path, true
	}
	return nil, "", "", false
}

// Bounds of ban-eviction's rule: its flood is 3 × max_keys requests, and
// it waits out one period of the rule.
const (
	evictionMaxKeys   = 10_000
	evictionMaxPeriod = time.Minute
	evictionFloodX    = 3
	evictionAfter     = 3 // requests of the banned client after the flood
	evictionTrip      = 50
)

func banEvictionRequests(a *attackRun) int64 {
	if r, _, _, ok := a.evictionRule(); ok {
		return evictionTrip + 1 + int64(evictionFloodX*r.MaxKeys) + evictionAfter
	}
	return 0
}

// runBanEviction (§1b): one client trips an ordinary rule's ban, waits
// out the rule's own period (so that only the ban refuses it), floods
// the rule with evictionFloodX × its max_keys new keys, then comes back.
// Every request after the first refusal falls within the ban and must be
// refused: the gain (bound 0) is those that reached the origin. A user
// elsewhere, and one in the banned client's /48, use the route after the
// flood (bound 0: their keys are their own).
func runBanEviction(a *attackRun) error {
	r, method, path, ok := a.evictionRule()
	if !ok {
		a.skip("ban-eviction", "", fmt.Sprintf("no ordinary rule of the policy %s keyed on [\"ip\"] has a ban on a key budget of at most %d keys and a period of at most %v (serve loadtest/testdata/attacks-bans.hcl)",
			a.p.policy, evictionMaxKeys, evictionMaxPeriod))
		return nil
	}
	site := a.v6Site()
	client := v6In(site, 0, 0, a.rng.Uint64()|1)
	other, near, err := a.elsewhereAndNear(v6In(site, 0x80, 0, a.rng.Uint64()|1), actAPI)
	if err != nil {
		return err
	}
	other.apiPath, near.apiPath = path, path
	tc, cs, err := a.beginCast("ban-eviction", "flood", other, near)
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	req := func() *rawRequest {
		q := a.request(method, path)
		a.clientHeader(q, client)
		return q
	}
	var tripped time.Time
	for range evictionTrip {
		at := time.Now()
		ans, err := tc.sendUncounted(c, req())
		if err != nil {
			return err
		}
		if ans.status != fasthttp.StatusOK {
			tripped = at
			break
		}
	}
	if tripped.IsZero() {
		return fmt.Errorf("ban-eviction: %d requests from one client to %s and none refused: %s is not what %s says", evictionTrip, path, r.Name, a.p.policy)
	}
	// Past the rule's own period the counter has decayed: only the ban
	// refuses now.
	if err := a.waitUntil(tripped.Add(r.Period + clockAllowance)); err != nil {
		return err
	}
	var reached, counted int64
	banned := func() error {
		q := req()
		q.tag = a.tag()
		if _, err := tc.sendUncounted(c, q); err != nil {
			return err
		}
		_, ok, err := a.origin.reached(a.ctx, q.tag)
		if ok {
			reached++
		}
		counted++
		return err
	}
	if err := banned(); err != nil {
		return err
	}
	c.close()
	// Each new key from a /48 of its own, in turn, so that the flood fills
	// the budget past the network share one /48 may make of it
	// (network_share): the flood is many networks', as an eviction needs.
	base := a.floodBase()
	fs, err := a.blast(evictionFloodX*r.MaxKeys, func(i int) *rawRequest {
		b := base
		b[5], b[6], b[7] = byte(i), byte(i>>8), byte(i>>16)
		q := a.request(method, path)
		a.clientHeader(q, netip.AddrFrom16(b))
		return q
	})
	if err != nil {
		return err
	}
	for range evictionAfter {
		if err := banned(); err != nil {
			return err
		}
	}
	if end := tripped.Add(ban.Duration(r) - clockAllowance); tc.last.After(end) {
		return fmt.Errorf("ban-eviction: the case outlasted %s's ban of %v: its bound means nothing", r.Name, ban.Duration(r))
	}
	tc.res.sent += fs.sent
	for s, k := range fs.statuses {
		tc.res.statuses[s] += k
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	tc.bound = &caseBoundResult{0, fmt.Sprintf("%s bans a key for %v from its first refusal: the %d requests of the banned client after it, one past the rule's period of %v and %d after the flood, fall within the ban",
		r.Name, ban.Duration(r), counted, r.Period, evictionAfter)}
	tc.finish(reached, fmt.Sprintf("the banned client's requests that reached the origin, before and after a flood of %d %s %s from new /64s of 256 /48s (max_keys %d)",
		fs.sent, method, path, r.MaxKeys))
	return nil
}

// waitUntil waits for t, or for the run's end.
func (a *attackRun) waitUntil(t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}
