package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// The otp-guessing scenario (issue 5): a brute force on one phone's codes.
// The guesser sends -attempts verify attempts, each from its own client
// address (so no per-client limit holds it) and without a cookie, and asks
// for a new code (a new session, so a fresh per-session budget) whenever
// the edge refuses one. The phone's ceiling (otp-verify-per-phone,
// counting attempts) must hold the attempts that reach the origin to
// -phone-ceiling, and the per-phone send limit (otp-send-per-phone) the
// codes sent to -send-limit.
//
// Against otp.hcl on a fresh phone: 5 attempts per code pass, each code's
// sixth is refused by its session's limit but still spends one of the
// phone's 15, so 5 + 5 + 3 = 13 attempts reach the origin over 3 codes,
// and every later attempt and send is refused.
//
// The guesser never guesses right: the demo origin tells each code
// (demo_code), and a guess that happens to equal it is replaced, so every
// attempt that reaches the origin is a wrong one, as nearly all of a real
// attacker's would be.

// guessingResult is what an otp-guessing run saw.
type guessingResult struct {
	target, origin string
	elapsed        time.Duration

	phone       string
	firstClient string
	verifies    otpTally
	verified    int64 // verify attempts the origin accepted: 0, the right code is never sent
	sends       otpTally
	verifyBound otpBound
	sendBound   otpBound
}

// failures lists the bounds exceeded.
func (r *guessingResult) failures() []string { return otpFailures(r.verifyBound, r.sendBound) }

// writeGuessingReport writes the run's report.
func writeGuessingReport(w io.Writer, r *guessingResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "otp-guessing: POST %s and %s through %s, counted at the origin %s, in %s\n\n",
		otpVerifyPath, otpSendPath, r.target, r.origin, r.elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "one phone, %s; %d wrong guesses, each request from its own client address (%s on), no cookie; a new code asked for after every refusal\n",
		r.phone, r.verifies.sent, r.firstClient)
	fmt.Fprintf(&b, "\nverify attempts\n")
	writeOTPCount(&b, "  ", r.verifies, r.verifyBound)
	fmt.Fprintf(&b, "  accepted         %d\n", r.verified)
	fmt.Fprintf(&b, "\ncodes sent\n")
	writeOTPCount(&b, "  ", r.sends, r.sendBound)

	if f := r.failures(); len(f) > 0 {
		fmt.Fprintf(&b, "\notp-guessing: FAIL: %s\n", strings.Join(f, "; "))
	} else {
		fmt.Fprintf(&b, "\notp-guessing: ok: %d of %d verify attempts and %d of %d code sends reached the origin, within their bounds (%d and %d)\n",
			r.verifyBound.reached, r.verifyBound.attempted, r.sendBound.reached, r.sendBound.attempted, r.verifyBound.bound, r.sendBound.bound)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// otpGuess returns the guesser's n-th guess: n's last six digits, or the
// next number's when they are the code, which the guesser must not send.
func otpGuess(n int, code string) string {
	g := fmt.Sprintf("%06d", n%1_000_000)
	if g == code {
		g = fmt.Sprintf("%06d", (n+1)%1_000_000)
	}
	return g
}

// runOTPGuessing runs otp-guessing.
func runOTPGuessing(ctx context.Context, cfg config) error {
	p := cfg.otp
	// The first send, each attempt, and a send after each refused attempt.
	if need := 1 + 2*p.attempts; need > cfg.requests {
		return fmt.Errorf("the scenario needs up to %d requests (-attempts %d and a send after each refused one, plus the first), over -requests %d",
			need, p.attempts, cfg.requests)
	}
	// A phone in a random block, so counters an earlier run left on it or
	// its range (an hour, in otp.hcl) most likely do not count.
	block, err := pickOTPBlock(rand.IntN)
	if err != nil {
		return err
	}
	phone := block.phones[rand.IntN(len(block.phones))]
	run, err := startOTPRun(ctx, cfg, p.origin)
	if err != nil {
		return err
	}
	defer run.close()
	origin, edge, before, start, addrs := run.origin, run.edge, run.before, run.start, run.addrs
	res := &guessingResult{
		target:      cfg.target.base,
		origin:      p.origin.base,
		phone:       phone,
		firstClient: addrs.peek(),
	}

	// send asks for a new code; id is "" when the edge refused.
	send := func() (id, code string, err error) {
		status, body, err := edge.do(ctx, fasthttp.MethodPost, otpSendPath, map[string]string{"phone": phone}, addrs.take())
		if err != nil {
			return "", "", err
		}
		id, code = otpChallenge(status, body)
		res.sends.add(status, id != "")
		return id, code, nil
	}
	id, code, err := send()
	if err != nil {
		return err
	}
	first := rand.IntN(1_000_000)
	for i := range p.attempts {
		body := map[string]string{"phone": phone, "challenge_id": id, "code": otpGuess(first+i, code)}
		status, _, err := edge.do(ctx, fasthttp.MethodPost, otpVerifyPath, body, addrs.take())
		if err != nil {
			return err
		}
		// 401 "invalid code" is the origin's answer; the edge refuses with
		// 429 (or 400, 503), never 401.
		res.verifies.add(status, status == fasthttp.StatusUnauthorized || status == fasthttp.StatusOK)
		if status == fasthttp.StatusOK {
			res.verified++
		}
		if status == fasthttp.StatusTooManyRequests {
			nid, ncode, err := send()
			if err != nil {
				return err
			}
			if nid != "" {
				id, code = nid, ncode
			}
		}
	}
	after, err := origin.hits(ctx)
	if err != nil {
		return err
	}
	res.elapsed = time.Since(start)

	if res.verifyBound, err = otpOriginBound(before, after, otpVerifyPath, res.verifies, "verify attempts", p.phoneCeiling, "-phone-ceiling"); err != nil {
		return err
	}
	if res.sendBound, err = otpOriginBound(before, after, otpSendPath, res.sends, "code sends", p.sendLimit, "-send-limit"); err != nil {
		return err
	}

	if err := writeGuessingReport(cfg.stdout, res); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if f := res.failures(); len(f) > 0 {
		return fmt.Errorf("%w: %s", errMismatch, strings.Join(f, "; "))
	}
	return nil
}
