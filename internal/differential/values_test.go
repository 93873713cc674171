package differential

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/edge-gateway/edge/otp"
)

// vals are the identity values of one send: a victim and a decoy of each
// identity, written into the request by its corpus case. Every send draws
// fresh ones (nextVals), so a log line names which value the origin read;
// the send's nonce (X-Differential-Send, part of every rule's key) is what
// keeps counters of different sends apart, whatever values repeat.
type vals struct {
	Victim, Decoy   string // phone numbers in E.164
	User, UserDecoy string // usernames
	// Email, EmailDecoy are email addresses, each another account than
	// the send's usernames: a login may name a username and an email that
	// differ, and the origin may act on either (issue 24).
	Email, EmailDecoy string
	Chal, ChalDecoy   string // OTP challenge ids
	Code              string // a six-digit OTP code (echoed, keyed by no rule)
}

// phonePool is a range of possible phone numbers: prefix followed by a
// zero-padded index below n.
type phonePool struct {
	prefix string
	digits int
	n      int
}

func (p phonePool) at(i int) string {
	return fmt.Sprintf("%s%0*d", p.prefix, p.digits, i%p.n)
}

// victimPools are the victims' numbers: the US's fictional 555-01XX lines
// across area codes, and other countries' example and drama ranges (Ofcom's
// 07700 900XXX, ACMA's 0491 570 XXX, and mobile ranges libphonenumber reads
// as possible in DE, FR, JP and IN). decoyPools are the numbers an attacker
// writes where the edge looks: Russian mobiles, the country the issue's
// bypass texted.
var (
	victimPools = []phonePool{
		{"+1202555", 4, 10000}, {"+1212555", 4, 10000}, {"+1415555", 4, 10000},
		{"+44770090", 4, 10000}, {"+61491570", 3, 1000}, {"+491512345", 4, 10000},
		{"+3361234", 4, 10000}, {"+8190123", 5, 100000}, {"+9198765", 5, 100000},
	}
	decoyPools = []phonePool{{"+7916123", 4, 10000}, {"+7925555", 4, 10000}}
)

// valueSource hands out fresh vals. Not safe for concurrent use: each
// stack has its own.
type valueSource struct {
	n int
}

// next returns the values of the next send, checking that both phone
// numbers are possible numbers in E.164 as the edge reads them (a pool that
// gave an impossible number would make every probe of it a 400).
func (s *valueSource) next(t testing.TB) vals {
	t.Helper()
	i := s.n
	s.n++
	v := vals{
		Victim:     victimPools[i%len(victimPools)].at(100 + i/len(victimPools)),
		Decoy:      decoyPools[i%len(decoyPools)].at(100 + i/len(decoyPools)),
		User:       fmt.Sprintf("victim%05d", i),
		UserDecoy:  fmt.Sprintf("decoy%05d", i),
		Email:      fmt.Sprintf("victim%05d@example.com", i),
		EmailDecoy: fmt.Sprintf("decoy%05d@example.org", i),
		Chal:       fmt.Sprintf("chv%05dq", i),
		ChalDecoy:  fmt.Sprintf("chd%05dq", i),
		Code:       fmt.Sprintf("%06d", (i*7919)%1000000),
	}
	for _, ph := range []string{v.Victim, v.Decoy} {
		p, err := otp.Normalize(ph, "US")
		if err != nil || p.E164 != ph {
			t.Fatalf("phone pool gave %q, which the edge reads as %q (%v): fix the pool", ph, p.E164, err)
		}
	}
	return v
}

// q is a form or query encoding of s (url.QueryEscape: '+' is %2B, ' ' is '+').
func q(s string) string { return url.QueryEscape(s) }
