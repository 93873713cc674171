package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// The credential-stuffing scenario (issue 11): one client address tries
// -accounts accounts once each, every one with a wrong password, as a
// stuffer replaying a leaked list does. The policy's count_distinct rule on
// the account, keyed on the client alone (login-accounts-per-ip in
// login.hcl), bounds how many distinct failing accounts one address may
// try: at most its limit reach the origin (per period of the run, as its
// members expire). Meanwhile -crowd real users behind one other address (a
// NAT or a carrier-grade NAT) each log in once with the right password:
// all of them must succeed, since a success is refunded and never counts
// as a failing account.
//
// The crowd's logins are spread evenly over -crowd-spread; by default,
// over the least time the policy's other limits on the crowd's address
// (login-per-client in login.hcl: a request rate per address, which a NAT
// crowd shares) need to let every one of them through, so what the run
// tests is the failure counting, not that rate. A crowd sent faster than
// the policy's per-address rate is refused by it, as the policy says.

// stuffingResult is what a credential-stuffing run saw.
type stuffingResult struct {
	target, origin string
	elapsed        time.Duration

	attacker, crowdAddr netip.Addr
	tries               otpTally
	bound               otpBound
	crowd               otpTally
	crowdOK             legitCheck
	spread              time.Duration
	spreadWhy           string
}

func (r *stuffingResult) failures() []string {
	return loginFailures([]otpBound{r.bound}, r.crowdOK)
}

// writeStuffingReport renders the run's report.
func writeStuffingReport(r *stuffingResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "credential-stuffing: POST %s through %s, counted at the origin %s, in %s\n\n",
		loginPath, r.target, r.origin, r.elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "attacker: one client address, %s; %d accounts, once each, a wrong password\n", r.attacker, r.tries.sent)
	writeOTPCount(&b, "  ", r.tries, r.bound)
	fmt.Fprintf(&b, "\ncrowd: %d users behind one client address, %s, one login each with the right password, spread over %s (%s)\n",
		r.crowd.sent, r.crowdAddr, r.spread.Round(time.Millisecond), r.spreadWhy)
	fmt.Fprintf(&b, "  answers          %s\n", otpStatuses(r.crowd.statuses))
	fmt.Fprintf(&b, "  succeeded        %s\n", r.crowdOK.line())
	if len(r.failures()) == 0 {
		fmt.Fprintf(&b, "\ncredential-stuffing: ok: %d of %d failing accounts reached the origin, within the bound (%d); %d of %d crowd logins succeeded\n",
			r.bound.reached, r.bound.attempted, r.bound.bound, r.crowdOK.succeeded, r.crowdOK.attempted)
	}
	return b.String()
}

// runCredentialStuffing runs credential-stuffing.
func runCredentialStuffing(ctx context.Context, cfg config) error {
	p := cfg.login
	if need := p.accounts + p.crowd; need > cfg.requests {
		return fmt.Errorf("the scenario sends %d requests (-accounts %d, -crowd %d), over -requests %d", need, p.accounts, p.crowd, cfg.requests)
	}
	run, err := startLoginRun(ctx, cfg)
	if err != nil {
		return err
	}
	defer run.close()
	attacker, crowdAddr := run.client(), run.client()
	distinct, err := run.distinctRule(attacker)
	if err != nil {
		return err
	}
	spread, why := p.crowdSpread, "-crowd-spread"
	if spread == 0 && p.crowd > 0 {
		if spread, why, err = run.crowdSpread(crowdAddr, p.crowd); err != nil {
			return err
		}
	}
	if dl, ok := ctx.Deadline(); ok && time.Now().Add(spread).After(dl) {
		return fmt.Errorf("the crowd's logins are spread over %s (%s), past the -duration budget; give a longer -duration or a shorter -crowd-spread", spread, why)
	}
	res := &stuffingResult{target: cfg.target.base, origin: run.origin.base, attacker: attacker, crowdAddr: crowdAddr, spread: spread, spreadWhy: why}
	res.crowdOK.who = "crowd logins"

	// The crowd, on its own connection, while the attacker runs.
	var wg sync.WaitGroup
	var crowdErr error
	crowdStart := time.Now()
	wg.Go(func() {
		c := run.newClient()
		defer c.close()
		for i := range p.crowd {
			if i > 0 && p.crowd > 1 {
				at := crowdStart.Add(time.Duration(int64(spread) * int64(i) / int64(p.crowd-1)))
				if err := sleepUntil(ctx, at); err != nil {
					crowdErr = err
					return
				}
			}
			status, err := c.login(ctx, crowdAddr, fmt.Sprintf("crowd-%s-%d@example.com", run.tag, i), p.password)
			if err != nil {
				crowdErr = err
				return
			}
			res.crowd.add(status, originAnswer(status))
			res.crowdOK.attempted++
			if status == 200 {
				res.crowdOK.succeeded++
			}
		}
	})
	c := run.newClient()
	var attackErr error
	for i := range p.accounts {
		status, err := c.login(ctx, attacker, fmt.Sprintf("stuffed-%s-%d@example.com", run.tag, i), "wrong-"+run.tag)
		if err != nil {
			attackErr = err
			break
		}
		res.tries.add(status, originAnswer(status))
	}
	c.close()
	wg.Wait()
	if err := errors.Join(attackErr, crowdErr); err != nil {
		return err
	}
	end := time.Now()
	res.elapsed = end.Sub(run.start)

	reached, err := run.finish(ctx, res.tries.forwarded+res.crowd.forwarded, res.tries.sent+res.crowd.sent)
	if err != nil {
		return err
	}
	// The crowd's requests that reached the origin are its origin answers:
	// the rest of the origin's count is the attacker's.
	res.bound = otpBound{
		what: "failing accounts", attempted: res.tries.sent, reached: reached - res.crowd.forwarded,
		bound: distinctAllowance(distinct.op, run.start, end), source: distinct.describe(),
	}
	return loginResult(cfg, "credential-stuffing", writeStuffingReport(res), res.failures())
}

// distinctRule returns the policy's count_distinct rule on the account,
// keyed on the client alone: the rule whose op counts members that follow
// the username (two usernames from one client, two members).
func (r *loginRun) distinctRule(client netip.Addr) (loginRule, error) {
	a, err := r.rulesFor(client, "model-a@example.com")
	if err != nil {
		return loginRule{}, err
	}
	b, err := r.rulesFor(client, "model-b@example.com")
	if err != nil {
		return loginRule{}, err
	}
	for i, x := range a {
		if x.op.Algorithm == rules.Distinct && keyedOn(x.rule, "ip") && i < len(b) && b[i].rule == x.rule && b[i].op.Member != x.op.Member {
			return x, nil
		}
	}
	return loginRule{}, fmt.Errorf("the policy %s has no enforcing count_distinct = \"account\" rule keyed on the client (key = [\"ip\"]) for POST %s: nothing bounds credential stuffing",
		r.m.path, loginPath)
}

// distinctAllowance returns the most distinct values op lets through on one
// key between start and end (with the clock allowance): its limit, once
// more for every period the run outlasts, since members expire a period
// after they were counted.
func distinctAllowance(op rules.Op, start, end time.Time) int64 {
	span := end.Sub(start) + 2*clockAllowance
	return op.Limit * (span.Microseconds()/max(op.PeriodUS, 1) + 1)
}

// crowdSpread returns the least time over which n logins from client,
// evenly spread, pass every enforcing rule that counts requests on the
// client's address alike for every account (failure-counting rules
// refund a success, and rules keyed on the account see each user once),
// with a margin for the latency of the first request; and which rule
// needs it.
func (r *loginRun) crowdSpread(client netip.Addr, n int) (time.Duration, string, error) {
	a, err := r.rulesFor(client, "model-a@example.com")
	if err != nil {
		return 0, "", err
	}
	b, err := r.rulesFor(client, "model-b@example.com")
	if err != nil {
		return 0, "", err
	}
	var need time.Duration
	why := "no per-address request limit holds it"
	for i, x := range a {
		if x.rule.Count == rules.CountFailures || x.op.Algorithm == rules.Distinct || i >= len(b) || b[i].op.Key != x.op.Key {
			continue
		}
		d, ok := spreadFor(x.op, int64(n))
		if !ok {
			return 0, "", fmt.Errorf("%s lets no %d logins from one address through in any time: give -crowd-spread, or a smaller -crowd", x.describe(), n)
		}
		if d > need {
			need, why = d, x.describe()
		}
	}
	if need == 0 {
		return 0, why, nil
	}
	// The edge reads its clock when a request arrives: the first arrives
	// later after its connection is made, which shortens the span the
	// edge sees. A tenth more, and 50 ms, cover it.
	return need + need/10 + 50*time.Millisecond, why, nil
}

// spreadFor returns the least span over which op lets n evenly spread
// requests on one key through from an empty counter; ok is false when it
// lets fewer than one through per period.
func spreadFor(op rules.Op, n int64) (time.Duration, bool) {
	if op.Limit < 1 || op.PeriodUS < 1 {
		return 0, false
	}
	us := time.Microsecond
	switch op.Algorithm {
	case rules.GCRA:
		if n <= op.Burst {
			return 0, true
		}
		return time.Duration(n-op.Burst) * time.Duration(max(op.PeriodUS/op.Limit, 1)) * us, true
	case rules.TokenBucket, rules.LeakyBucket:
		if n <= op.Burst {
			return 0, true
		}
		return time.Duration((n-op.Burst)*op.PeriodUS/op.Limit) * us, true
	case rules.FixedWindow, rules.SlidingWindow, rules.SlidingLog:
		if n <= op.Limit {
			return 0, true
		}
		return time.Duration((n+op.Limit-1)/op.Limit) * time.Duration(op.PeriodUS) * us, true
	}
	return 0, false
}
