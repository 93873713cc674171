package main

import (
	"fmt"
	"net/netip"

	"github.com/edge-gateway/edge/otp"
)

// challengeGuesses is otp-challenge's verify attempts, each naming another
// phone beside the one challenge ID.
const challengeGuesses = 20

func otpChallengeRequests(*attackRun) int64 { return 1 + challengeGuesses }

// runOTPChallenge guesses at one challenge's code with a new phone number
// written beside its ID on every guess, each from a new client. An origin
// that finds the challenge by its ID alone takes every guess as one at that
// code, so the bound is the policy's limit on the request the attacker
// means (one challenge, the rotating phones as sent). It is held by a rule
// keyed on the challenge ID alone: otp_session is the challenge ID (issue
// 24; it was phone + ID, which gave each phone a fresh session counter, and
// the shipped policy held it with rules keyed on the raw challenge field,
// found by trying the edge as an attacker would, issue 9).
func runOTPChallenge(a *attackRun) error {
	if otp.IdentityOf(a.m.p) == nil || len(otp.IdentityOf(a.m.p).Phone) == 0 || len(otp.IdentityOf(a.m.p).OTPSession) == 0 {
		a.skip("otp-challenge", "", fmt.Sprintf("the policy %s reads no phone or challenge (identity { phone, otp_session })", a.p.policy))
		return nil
	}
	b, err := a.block()
	if err != nil {
		return err
	}
	// The guesses name phones[1…challengeGuesses]; the owner of the last
	// one verified it before.
	tc, cs, err := a.beginCast("otp-challenge", "phone-rotation", a.ownerOf(b.phones[len(b.phones)-1]))
	if err != nil {
		return err
	}
	// The code is asked for in a case of its own, so the verify case's
	// bound holds only verifies.
	sends := &tcase{a: a, res: caseResult{name: "otp-challenge/code-sent", statuses: make(map[int]int64)}, before: tc.before}
	c := a.conn(netip.Addr{})
	defer c.close()
	client := a.v6Client()
	ans, err := sends.send(c, a.otpRequest(otpSendPath, client, "application/json", jsonBody(otpFields(b.phones[0]))), a.otpCanon(otpSendPath, client, otpFields(b.phones[0])))
	if err != nil {
		return err
	}
	id, code := otpChallenge(ans.status, ans.body)
	if id == "" {
		return fmt.Errorf("otp-challenge: the send to %s got %d and no challenge", b.phones[0], ans.status)
	}
	first := a.rng.IntN(1_000_000)
	for i := range challengeGuesses {
		phone := b.phones[1+i%(len(b.phones)-1)]
		fields := map[string]string{"phone": phone, "challenge_id": id, "code": otpGuess(first+i, code)}
		client := a.v6Client()
		if _, err := tc.send(c, a.otpRequest(otpVerifyPath, client, "application/json", jsonBody(fields)), a.otpCanon(otpVerifyPath, client, fields)); err != nil {
			return err
		}
	}
	g, err := tc.reachedAll(func(p string) bool { return p == otpVerifyPath })
	if err != nil {
		return err
	}
	sg, err := sends.reachedAll(func(p string) bool { return p == otpSendPath })
	if err != nil {
		return err
	}
	if err := tc.play(cs, sends); err != nil {
		return err
	}
	sends.cast = noBystanders("played with otp-challenge/phone-rotation")
	sends.cast.prior = cs.prior
	tc.finish(g, "wrong guesses at challenge "+id+" that reached the origin, a new phone beside it each time")
	sends.finish(sg, "codes sent to "+b.phones[0])
	return nil
}
