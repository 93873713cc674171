package gateway

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestOneChallengeGetsFiveGuessesWhateverThePhone: through the real server
// with the shipped policies.hcl, guesses at one challenge that each name
// another phone beside its ID reach the origin at most five times, in JSON
// and in form bodies alike: otp_session is the challenge ID alone (issue
// 24; it was phone + ID, and issue 9 found an origin that finds the
// challenge by its ID alone then gave five guesses per phone written
// beside it).
func TestOneChallengeGetsFiveGuessesWhateverThePhone(t *testing.T) {
	for _, format := range []string{"json", "form"} {
		t.Run(format, func(t *testing.T) {
			n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
			r := do(t, "POST", "http://"+n.addr+"/otp/send", `{"phone":"+13125550142"}`, "X-Forwarded-For", "198.51.100.7")
			var c struct {
				ID string `json:"challenge_id"`
			}
			if err := json.Unmarshal([]byte(r.body), &c); r.status != 200 || err != nil || c.ID == "" {
				t.Fatalf("send: got %d %q", r.status, r.body)
			}
			for i := range 12 {
				// One client per guess, so only the challenge's own limit
				// can hold them; a new phone each time.
				phone := fmt.Sprintf("+1312555%04d", 200+i)
				from := fmt.Sprintf("203.0.113.%d", i+1)
				if format == "json" {
					body := fmt.Sprintf(`{"phone":%q,"challenge_id":%q,"code":"000000"}`, phone, c.ID)
					postBody(t, "http://"+n.addr+"/otp/verify", "application/json", body, from)
				} else {
					body := url.Values{"phone": {phone}, "challenge_id": {c.ID}, "code": {"000000"}}.Encode()
					postBody(t, "http://"+n.addr+"/otp/verify", "application/x-www-form-urlencoded", body, from)
				}
			}
			if got := n.hits(t)["/otp/verify"]; got != 5 {
				t.Errorf("the origin saw %d guesses at one challenge, want otp-verify-per-session's 5 (%s)", got, format)
			}
		})
	}
}

// challengeSpellings returns spellings of a challenge ID (rand.Text's
// base32, upper case) that an origin finding challenges in a case- or
// accent-insensitive column (MySQL 8's default utf8mb4_0900_ai_ci, SQL
// Server's _CI_AI) reads as that challenge.
func challengeSpellings(id string) []string {
	lower := strings.ToLower(id)
	mixed := []byte(id)
	for i := 0; i < len(mixed); i += 2 {
		if 'A' <= mixed[i] && mixed[i] <= 'Z' {
			mixed[i] += 'a' - 'A'
		}
	}
	var wide strings.Builder
	for _, r := range id {
		wide.WriteRune(r - '!' + 0xFF01) // full width
	}
	return []string{
		id, lower, string(mixed), wide.String(),
		id[:3] + "\u00ad" + id[3:],       // a soft hyphen
		id[:1] + "\u0301" + id[1:],       // a combining acute accent
		lower[:5] + "\u200d" + lower[5:], // a zero-width joiner
		id[:4] + "\U000e0100" + id[4:],   // a variation selector
	}
}

// TestOneChallengeGetsFiveGuessesInEverySpelling (issue 24 §2): through
// the real server on the shipped policy, guesses at one challenge written
// in eight spellings of its ID, each guess from a new client, reach the
// origin five times in all (before, each spelling had five of its own: 12
// of 12); another challenge keeps its own five.
func TestOneChallengeGetsFiveGuessesInEverySpelling(t *testing.T) {
	n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	send := func(phone, from string) string {
		t.Helper()
		r := do(t, "POST", "http://"+n.addr+"/otp/send", fmt.Sprintf(`{"phone":%q}`, phone), "X-Forwarded-For", from)
		var c struct {
			ID string `json:"challenge_id"`
		}
		if err := json.Unmarshal([]byte(r.body), &c); r.status != 200 || err != nil || c.ID == "" {
			t.Fatalf("send: got %d %q", r.status, r.body)
		}
		return c.ID
	}
	victim, other := send("+13125550142", "198.51.100.7"), send("+13125550143", "198.51.100.8")
	guess := func(phone, id string, i int) {
		t.Helper()
		body := fmt.Sprintf(`{"phone":%q,"challenge_id":%q,"code":"000000"}`, phone, id)
		postBody(t, "http://"+n.addr+"/otp/verify", "application/json", body, fmt.Sprintf("203.0.113.%d", i+1))
	}
	spellings := challengeSpellings(victim)
	for i := range 12 {
		guess("+13125550142", spellings[i%len(spellings)], i)
	}
	if got := n.hits(t)["/otp/verify"]; got != 5 {
		t.Errorf("the origin saw %d guesses at one challenge over %d spellings of its ID, want otp-verify-per-session's 5", got, len(spellings))
	}
	for i := range 7 {
		guess("+13125550143", other, 100+i)
	}
	if got := n.hits(t)["/otp/verify"]; got != 10 {
		t.Errorf("another challenge: the origin saw %d guesses in all, want its own 5 more (10)", got)
	}
}
