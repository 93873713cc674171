package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
)

// The brute-force scenario (issue 11): -guessers addresses each send
// -guesses wrong passwords for one account, in turn, while the account's
// real user logs in -user-logins times from its own address, spread
// through the attack. The policy's failure-counting rule keyed on the
// account and the client (login-failures-account-client in login.hcl)
// bounds each address's guesses that reach the origin; an account-wide
// rule (key = ["account"]), if the policy has one, bounds them all
// together. The real user must succeed every time: a lockout of the
// account for everyone would hand the attacker a denial of service.

// bruteResult is what a brute-force run saw.
type bruteResult struct {
	target, origin string
	elapsed        time.Duration

	account    string
	firstAddr  netip.Addr
	guessers   int
	guesses    otpTally
	bound      otpBound
	perAddr    loginRule
	perAllow   int64 // perAddr's allowance on one address over the run
	maxPerAddr int64 // the most guesses of one address that reached the origin
	over       int   // addresses with more than perAllow through
	account1   *loginRule
	userAddr   netip.Addr
	user       otpTally
	userOK     legitCheck
}

func (r *bruteResult) failures() []string {
	f := loginFailures([]otpBound{r.bound}, r.userOK)
	if r.over > 0 {
		f = append(f, fmt.Sprintf("%d of %d addresses had more than %d guesses through (the most: %d), over %s", r.over, r.guessers, r.perAllow, r.maxPerAddr, r.perAddr.rule.Name))
	}
	return f
}

func writeBruteReport(r *bruteResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "brute-force: POST %s through %s, counted at the origin %s, in %s\n\n",
		loginPath, r.target, r.origin, r.elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "attacker: %d client addresses (%s on), %d wrong guesses each, one account, %s\n",
		r.guessers, r.firstAddr, r.guesses.sent/int64(max(r.guessers, 1)), r.account)
	writeOTPCount(&b, "  ", r.guesses, r.bound)
	fmt.Fprintf(&b, "  per address      at most %d through (bound %d, %s)\n", r.maxPerAddr, r.perAllow, r.perAddr.describe())
	if r.account1 != nil {
		fmt.Fprintf(&b, "  account-wide     %s\n", r.account1.describe())
	} else {
		fmt.Fprintf(&b, "  account-wide     none: the policy has no rule keyed on the account alone\n")
	}
	fmt.Fprintf(&b, "\nreal user: its own client address, %s, %d logins with the right password during the attack\n", r.userAddr, r.user.sent)
	fmt.Fprintf(&b, "  answers          %s\n", otpStatuses(r.user.statuses))
	fmt.Fprintf(&b, "  succeeded        %s\n", r.userOK.line())
	if len(r.failures()) == 0 {
		fmt.Fprintf(&b, "\nbrute-force: ok: %d of %d guesses reached the origin, within the bound (%d); %d of %d of the real user's logins succeeded\n",
			r.bound.reached, r.bound.attempted, r.bound.bound, r.userOK.succeeded, r.userOK.attempted)
	}
	return b.String()
}

// runBruteForce runs brute-force.
func runBruteForce(ctx context.Context, cfg config) error {
	p := cfg.login
	if need := p.guessers*p.guesses + p.userLogins; need > cfg.requests {
		return fmt.Errorf("the scenario sends %d requests (-guessers %d × -guesses %d, -user-logins %d), over -requests %d",
			need, p.guessers, p.guesses, p.userLogins, cfg.requests)
	}
	run, err := startLoginRun(ctx, cfg)
	if err != nil {
		return err
	}
	defer run.close()
	res := &bruteResult{target: cfg.target.base, origin: run.origin.base, guessers: p.guessers, account: fmt.Sprintf("brute-%s@example.com", run.tag)}
	res.userOK.who = "of the real user's logins"
	res.userAddr = run.client()
	addrs := make([]netip.Addr, p.guessers)
	for i := range addrs {
		addrs[i] = run.client()
	}
	res.firstAddr = addrs[0]
	found, err := run.rulesFor(addrs[0], res.account)
	if err != nil {
		return err
	}
	var perAddr, account *loginRule
	for i := range found {
		x := &found[i]
		switch {
		case perAddr == nil && x.rule.Count == rules.CountFailures && keyedOn(x.rule, "account", "ip"):
			perAddr = x
		case account == nil && keyedOn(x.rule, "account"):
			account = x
		}
	}
	if perAddr == nil {
		return fmt.Errorf("the policy %s has no enforcing count = \"failures\" rule keyed on the account and the client (key = [\"account\", \"ip\"]) for POST %s: nothing bounds a brute force per address",
			run.m.path, loginPath)
	}
	res.perAddr, res.account1 = *perAddr, account

	c := run.newClient()
	defer c.close()
	// The real user is a browser: it loads the login page (getting its
	// visitor cookie, where the policy has visitors) and logs in once
	// before the attack, which makes it known to a rule with
	// known_visitors; then it logs in during the attack with that cookie.
	uc := run.newClient()
	defer uc.close()
	var visits int64 // the page loads, which reach the origin's /login too
	if vc := nat.ConfigOf(run.m.p); vc != nil {
		if _, err := uc.visit(ctx, res.userAddr, vc.Cookie); err != nil {
			return err
		}
		visits++
	}
	total := p.guessers * p.guesses
	every := total/max(p.userLogins, 1) + 1 // a real login after every so many guesses
	through := make([]int64, p.guessers)
	sent := 0
	userLogin := func() error {
		status, err := uc.login(ctx, res.userAddr, res.account, p.password)
		if err != nil {
			return err
		}
		res.user.add(status, originAnswer(status))
		res.userOK.attempted++
		if status == 200 {
			res.userOK.succeeded++
		}
		return nil
	}
	if err := userLogin(); err != nil { // before the attack
		return err
	}
	for g := range p.guesses {
		for i, a := range addrs {
			if res.user.sent < int64(p.userLogins) && sent%every == every/2 {
				if err := userLogin(); err != nil {
					return err
				}
			}
			status, err := c.login(ctx, a, res.account, fmt.Sprintf("wrong-%s-%d-%d", run.tag, i, g))
			if err != nil {
				return err
			}
			sent++
			res.guesses.add(status, originAnswer(status))
			if originAnswer(status) {
				through[i]++
			}
		}
	}
	for res.user.sent < int64(p.userLogins) {
		if err := userLogin(); err != nil {
			return err
		}
	}
	end := time.Now()
	res.elapsed = end.Sub(run.start)

	reached, err := run.finish(ctx, res.guesses.forwarded+res.user.forwarded+visits, res.guesses.sent+res.user.sent+visits)
	if err != nil {
		return err
	}
	res.perAllow = allowance(perAddr.op, run.start.Add(-clockAllowance), end.Add(clockAllowance))
	var bound int64
	for _, n := range through {
		bound += min(int64(p.guesses), res.perAllow)
		res.maxPerAddr = max(res.maxPerAddr, n)
		if n > res.perAllow {
			res.over++
		}
	}
	source := fmt.Sprintf("%s, %d addresses", perAddr.describe(), p.guessers)
	if account != nil {
		if a := allowance(account.op, run.start.Add(-clockAllowance), end.Add(clockAllowance)); a < bound {
			bound, source = a, account.describe()
		}
	}
	res.bound = otpBound{what: "guesses", attempted: res.guesses.sent, reached: reached - res.user.forwarded - visits, bound: bound, source: source}
	return loginResult(cfg, "brute-force", writeBruteReport(res), res.failures())
}
