package demo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for OTP expiry.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type sendResponse struct {
	ChallengeID string `json:"challenge_id"`
	DemoCode    string `json:"demo_code"`
}

func otpSend(t *testing.T, base string, phone string) sendResponse {
	t.Helper()
	h, b := jsonBody(t, map[string]string{"phone": phone})
	r := call(t, base, "POST", "/otp/send", h, b)
	if r.status != 200 {
		t.Fatalf("POST /otp/send: got %d %s, want 200", r.status, r.body)
	}
	var s sendResponse
	if err := json.Unmarshal([]byte(r.body), &s); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
	if s.ChallengeID == "" || len(s.DemoCode) != 6 || strings.Trim(s.DemoCode, "0123456789") != "" {
		t.Fatalf("POST /otp/send: got %+v, want a challenge ID and a 6-digit code", s)
	}
	return s
}

func otpVerify(t *testing.T, base string, f url.Values) int {
	t.Helper()
	h, b := formBody(f)
	return call(t, base, "POST", "/otp/verify", h, b).status
}

// otherCode returns a 6-digit code different from code.
func otherCode(code string) string {
	if code == "000000" {
		return "000001"
	}
	return "000000"
}

func TestOTPRoundTrip(t *testing.T) {
	t.Parallel()
	base := startOrigin(t, New())

	s := otpSend(t, base, "+1 202-555-0143")
	s2 := otpSend(t, base, "+12025550143")
	if s.ChallengeID == s2.ChallengeID {
		t.Errorf("two sends gave the same challenge ID %q", s.ChallengeID)
	}

	steps := []struct {
		name string
		form url.Values
		want int
	}{
		{"wrong code", url.Values{"phone": {"+12025550143"}, "challenge_id": {s.ChallengeID}, "code": {otherCode(s.DemoCode)}}, 401},
		{"wrong phone", url.Values{"phone": {"+12025550144"}, "challenge_id": {s.ChallengeID}, "code": {s.DemoCode}}, 401},
		{"unknown challenge", url.Values{"phone": {"+12025550143"}, "challenge_id": {"nope"}, "code": {s.DemoCode}}, 401},
		{"other challenge's code", url.Values{"phone": {"+12025550143"}, "challenge_id": {s2.ChallengeID}, "code": {otherCode(s2.DemoCode)}}, 401},
		{"right code, phone reformatted", url.Values{"phone": {"+12025550143"}, "challenge_id": {s.ChallengeID}, "code": {s.DemoCode}}, 200},
		{"consumed", url.Values{"phone": {"+12025550143"}, "challenge_id": {s.ChallengeID}, "code": {s.DemoCode}}, 401},
		{"second challenge still valid", url.Values{"phone": {"+1 (202) 555-0143"}, "challenge_id": {s2.ChallengeID}, "code": {s2.DemoCode}}, 200},
	}
	for _, st := range steps { // in order: each step sees the previous ones
		if got := otpVerify(t, base, st.form); got != st.want {
			t.Errorf("%s: got %d, want %d", st.name, got, st.want)
		}
	}

	// JSON verify, with the code as a JSON number.
	s3 := otpSend(t, base, "+447700900123")
	body := fmt.Sprintf(`{"phone":"+447700900123","challenge_id":%q,"code":%s}`, s3.ChallengeID, s3.DemoCode)
	if s3.DemoCode[0] == '0' { // a JSON number cannot start with 0
		body = fmt.Sprintf(`{"phone":"+447700900123","challenge_id":%q,"code":%q}`, s3.ChallengeID, s3.DemoCode)
	}
	r := call(t, base, "POST", "/otp/verify", http.Header{"Content-Type": {"application/json"}}, strings.NewReader(body))
	if r.status != 200 {
		t.Errorf("JSON verify: got %d %s, want 200", r.status, r.body)
	}

	h, b := jsonBody(t, map[string]string{"phone": ""})
	if r := call(t, base, "POST", "/otp/send", h, b); r.status != 400 {
		t.Errorf("send without phone: got %d, want 400", r.status)
	}
}

func TestOTPExpiry(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	o := New()
	o.now = clk.Now
	base := startOrigin(t, o)

	early := otpSend(t, base, "+12025550143")
	late := otpSend(t, base, "+12025550143")
	form := func(s sendResponse) url.Values {
		return url.Values{"phone": {"+12025550143"}, "challenge_id": {s.ChallengeID}, "code": {s.DemoCode}}
	}

	clk.Advance(challengeTTL - time.Nanosecond)
	if got := otpVerify(t, base, form(early)); got != 200 {
		t.Errorf("verify just before expiry: got %d, want 200", got)
	}
	clk.Advance(time.Nanosecond)
	if got := otpVerify(t, base, form(late)); got != 401 {
		t.Errorf("verify at expiry: got %d, want 401", got)
	}
}

func TestChallengesBounded(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	o := New()
	o.now = clk.Now
	o.maxChallenges = 100

	for i := range o.maxChallenges + 1 {
		o.addChallenge(&challenge{id: fmt.Sprint(i), phone: "1", code: "123456", expires: clk.Now().Add(challengeTTL)})
	}
	if got := len(o.challenges); got != o.maxChallenges {
		t.Errorf("challenges after overfill: got %d, want %d", got, o.maxChallenges)
	}
	if o.verifyChallenge("0", "1", "123456") {
		t.Errorf("oldest challenge survived overfill")
	}
	if !o.verifyChallenge("1", "1", "123456") {
		t.Errorf("second oldest challenge was dropped")
	}

	// Expired challenges go on the next send.
	clk.Advance(challengeTTL)
	o.addChallenge(&challenge{id: "new", phone: "1", code: "123456", expires: clk.Now().Add(challengeTTL)})
	if got := len(o.challenges); got != 1 || o.order.Len() != 1 {
		t.Errorf("challenges after expiry: got %d (list %d), want 1", got, o.order.Len())
	}
}
