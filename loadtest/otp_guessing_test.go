package main

import (
	"strings"
	"testing"
	"time"
)

func TestOTPGuess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int
		code string
		want string
	}{
		{0, "", "000000"},
		{42, "123456", "000042"},
		{123456, "123456", "123457"}, // the code itself is never sent
		{999_999, "999999", "000000"},
		{1_000_042, "", "000042"},
	}
	for _, tt := range tests {
		if got := otpGuess(tt.n, tt.code); got != tt.want {
			t.Errorf("otpGuess(%d, %q) = %q, want %q", tt.n, tt.code, got, tt.want)
		}
	}
	// A thousand guesses in a row around the code: never the code.
	for i := range 1000 {
		if otpGuess(500_000+i, "500500") == "500500" {
			t.Fatalf("guess %d is the code", i)
		}
	}
}

func guessingFixture(verifyReached, sendReached int64) *guessingResult {
	r := &guessingResult{
		target:      "http://127.0.0.1:18080",
		origin:      "http://127.0.0.1:19000",
		elapsed:     237 * time.Millisecond,
		phone:       "+12025550142",
		firstClient: "198.18.3.4",
	}
	for i := range int64(1000) {
		if i < verifyReached {
			r.verifies.add(401, true)
		} else {
			r.verifies.add(429, false)
		}
	}
	for i := range 1 + 1000 - verifyReached {
		if i < sendReached {
			r.sends.add(200, true)
		} else {
			r.sends.add(429, false)
		}
	}
	r.verifyBound = otpBound{what: "verify attempts", attempted: r.verifies.sent, reached: verifyReached, bound: 15, source: "-phone-ceiling"}
	r.sendBound = otpBound{what: "code sends", attempted: r.sends.sent, reached: sendReached, bound: 3, source: "-send-limit"}
	return r
}

func TestGuessingReport(t *testing.T) {
	t.Parallel()
	r := guessingFixture(13, 3)
	if f := r.failures(); f != nil {
		t.Errorf("failures %q, want none", f)
	}
	var out strings.Builder
	if err := writeGuessingReport(&out, r); err != nil {
		t.Fatal(err)
	}
	want := `otp-guessing: POST /otp/verify and /otp/send through http://127.0.0.1:18080, counted at the origin http://127.0.0.1:19000, in 237ms

one phone, +12025550142; 1000 wrong guesses, each request from its own client address (198.18.3.4 on), no cookie; a new code asked for after every refusal

verify attempts
  attempted        1000
  answers          401 ×13, 429 ×987
  reached origin   13    bound 15 (-phone-ceiling): ok
  accepted         0

codes sent
  attempted        988
  answers          200 ×3, 429 ×985
  reached origin   3     bound 3 (-send-limit): ok

otp-guessing: ok: 13 of 1000 verify attempts and 3 of 988 code sends reached the origin, within their bounds (15 and 3)
`
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
	// The bound itself is within it.
	if f := guessingFixture(15, 3).failures(); f != nil {
		t.Errorf("15 and 3: failures %q, want none", f)
	}
}

func TestGuessingFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		verify, send int64
		want         []string
	}{
		{16, 3, []string{"16 of 1000 verify attempts reached the origin, over the bound of 15 (-phone-ceiling)"}},
		{13, 5, []string{"5 of 988 code sends reached the origin, over the bound of 3 (-send-limit)"}},
		{150, 4, []string{"150 of 1000 verify attempts", "4 of 851 code sends"}},
	}
	for _, tt := range tests {
		r := guessingFixture(tt.verify, tt.send)
		f := r.failures()
		if len(f) != len(tt.want) {
			t.Errorf("%d/%d: failures %q, want %d", tt.verify, tt.send, f, len(tt.want))
			continue
		}
		var out strings.Builder
		if err := writeGuessingReport(&out, r); err != nil {
			t.Fatal(err)
		}
		for i, w := range tt.want {
			if !strings.HasPrefix(f[i], w) {
				t.Errorf("failure %d: %q, want %q", i, f[i], w)
			}
			if !strings.Contains(out.String(), "\notp-guessing: FAIL: ") || !strings.Contains(out.String(), w) {
				t.Errorf("report lacks the failure %q:\n%s", w, out.String())
			}
		}
	}
}
