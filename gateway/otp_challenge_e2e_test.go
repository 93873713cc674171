package gateway

import (
	"encoding/json"
	"fmt"
	"net/url"
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
