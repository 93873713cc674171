package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/otp"
)

func TestReadForeignNumbers(t *testing.T) {
	t.Parallel()
	const csv = `region,country_code,type,national_number,e164,national_format,international_format,valid,detected_type,detected_region
AG,1,mobile,2684641234,+12684641234,(268) 464-1234,+1 268-464-1234,true,mobile,AG
US,1,mobile,2015550123,+12015550123,(201) 555-0123,+1 201-555-0123,true,fixedLineOrMobile,US
GB,44,mobile,7400123456,+447400123456,07400 123456,+44 7400 123456,true,mobile,GB
GG,44,mobile,7781123456,+447781123456,07781 123456,+44 7781 123456,true,mobile,GG
NG,234,fixedLine,12345678,+23412345678,01 234 5678,+234 1 234 5678,true,fixedLine,NG
NG,234,mobile,8021234567,+2348021234567,0802 123 4567,+234 802 123 4567,true,mobile,NG
RU,7,mobile,9123456789,+79123456789,8 (912) 345-67-89,+7 912 345-67-89,true,mobile,RU
RU,7,mobile,9223456789,+79223456789,8 (922) 345-67-89,+7 922 345-67-89,true,mobile,RU
XX,999,mobile,1,+9991,1,+999 1,false,,
`
	got, err := readForeignNumbers(strings.NewReader(csv), "inline", 4)
	if err != nil {
		t.Fatal(err)
	}
	// pumpingCountries first (RU before NG), then the others in the file's
	// order; one number per region; US and GB, fixed lines and invalid
	// rows left out.
	want := []otpForeignNumber{
		{"RU", "+79123456789"},
		{"NG", "+2348021234567"},
		{"AG", "+12684641234"},
		{"GG", "+447781123456"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := readForeignNumbers(strings.NewReader(csv), "inline", 2); err != nil || !slices.Equal(got, want[:2]) {
		t.Errorf("2 numbers: got %v, %v; want %v", got, err, want[:2])
	}
	if _, err := readForeignNumbers(strings.NewReader(csv), "inline", 5); err == nil || !strings.Contains(err.Error(), "only 4 regions") {
		t.Errorf("5 numbers of 4: got %v", err)
	}
	if _, err := readForeignNumbers(strings.NewReader("region,type\nRU,mobile\n"), "inline", 1); err == nil || !strings.Contains(err.Error(), `no "e164" column`) {
		t.Errorf("missing column: got %v", err)
	}
}

// TestForeignNumbersFixture: the default -foreign-numbers takes one number
// of each of pumpingCountries from the real fixture, each outside the
// allow list as the edge reads it.
func TestForeignNumbersFixture(t *testing.T) {
	t.Parallel()
	got, err := loadForeignNumbers(otpPhonesPath, defaultOTPParams.foreign)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(pumpingCountries) {
		t.Fatalf("%d numbers, want %d", len(got), len(pumpingCountries))
	}
	for i, fn := range got {
		if fn.region != pumpingCountries[i] {
			t.Errorf("number %d: region %s, want %s", i, fn.region, pumpingCountries[i])
		}
		p, err := otp.Normalize(fn.e164, "US")
		if err != nil || p.E164 != fn.e164 || p.Country() != fn.region || otpAllowed(p.Country()) {
			t.Errorf("%v: normalised %+v, %v", fn, p, err)
		}
	}
	// Well beyond the named countries: every region the fixture has.
	if got, err := loadForeignNumbers(otpPhonesPath, 233); err != nil || len(got) != 233 {
		t.Errorf("233 numbers: got %d, %v", len(got), err)
	}
	if _, err := loadForeignNumbers("does-not-exist.csv", 1); err == nil || !strings.Contains(err.Error(), "reading phone numbers") {
		t.Errorf("missing fixture: got %v", err)
	}
}

func pumpingFixture(blockReached, foreignReached int64) *pumpingResult {
	b, _ := otpBlockFor(202)
	r := &pumpingResult{
		target:      "http://127.0.0.1:18080",
		origin:      "http://127.0.0.1:19000",
		elapsed:     42 * time.Millisecond,
		block:       b,
		blockClient: "198.18.0.7",
		foreign:     []otpForeignNumber{{"RU", "+79123456789"}, {"NG", "+2348021234567"}},
	}
	for i := range int64(100) {
		if i < blockReached {
			r.blockSends.add(200, true)
		} else {
			r.blockSends.add(429, false)
		}
	}
	for i := range int64(2) {
		if i < foreignReached {
			r.foreignSends.add(200, true)
		} else {
			r.foreignSends.add(429, false)
		}
	}
	r.blockBound = otpBound{what: "block sends", attempted: 100, reached: blockReached, bound: 5, source: "-range-limit"}
	r.foreignBound = otpBound{what: "foreign sends", attempted: 2, reached: foreignReached, bound: 0, source: "the country allow list"}
	return r
}

func TestPumpingReport(t *testing.T) {
	t.Parallel()
	r := pumpingFixture(5, 0)
	if f := r.failures(); f != nil {
		t.Errorf("failures %q, want none", f)
	}
	var out strings.Builder
	if err := writePumpingReport(&out, r); err != nil {
		t.Fatal(err)
	}
	want := `otp-pumping: POST /otp/send through http://127.0.0.1:18080, counted at the origin http://127.0.0.1:19000, in 42ms

phase A, one numbering block: +12025550100 … +12025550199 (phone_range +12025550)
  100 numbers, each once, each from its own client address (198.18.0.7 on), no cookie
  attempted        100
  answers          200 ×5, 429 ×95
  reached origin   5     bound 5 (-range-limit): ok

phase B, countries outside US, CA, GB: 2 numbers, one mobile example per country, each from its own client address
  RU NG
  attempted        2
  answers          429 ×2
  reached origin   0     bound 0 (the country allow list): ok

otp-pumping: ok: 5 of 100 block sends and 0 of 2 foreign sends reached the origin, within their bounds (5 and 0)
`
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPumpingFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		block, foreign int64
		want           []string // in the failures and the report's last line
	}{
		{6, 0, []string{"6 of 100 block sends reached the origin, over the bound of 5 (-range-limit)"}},
		{5, 1, []string{"1 of 2 foreign sends reached the origin, over the bound of 0 (the country allow list)"}},
		{100, 2, []string{"100 of 100 block sends", "2 of 2 foreign sends"}},
	}
	for _, tt := range tests {
		r := pumpingFixture(tt.block, tt.foreign)
		f := r.failures()
		if len(f) != len(tt.want) {
			t.Errorf("%d/%d: failures %q, want %d", tt.block, tt.foreign, f, len(tt.want))
			continue
		}
		var out strings.Builder
		if err := writePumpingReport(&out, r); err != nil {
			t.Fatal(err)
		}
		for i, w := range tt.want {
			if !strings.HasPrefix(f[i], w) {
				t.Errorf("failure %d: %q, want %q", i, f[i], w)
			}
			if !strings.Contains(out.String(), "\notp-pumping: FAIL: ") || !strings.Contains(out.String(), w) {
				t.Errorf("report lacks the failure %q:\n%s", w, out.String())
			}
		}
		if !strings.Contains(out.String(), "EXCEEDED by ") {
			t.Errorf("report lacks EXCEEDED:\n%s", out.String())
		}
	}
}

func TestOTPUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"remote origin", []string{"-scenario", "otp-pumping", "-origin", "http://192.0.2.1:19000"}, "-origin \"http://192.0.2.1:19000\": host \"192.0.2.1\" is not a loopback address"},
		{"https origin", []string{"-scenario", "otp-guessing", "-origin", "https://127.0.0.1:19000"}, "scheme must be http"},
		{"negative range limit", []string{"-scenario", "otp-pumping", "-range-limit", "-1"}, "-range-limit"},
		{"no foreign numbers", []string{"-scenario", "otp-pumping", "-foreign-numbers", "0"}, "-foreign-numbers"},
		{"no attempts", []string{"-scenario", "otp-guessing", "-attempts", "0"}, "-attempts must be in [1, 10000]"},
		{"too many attempts", []string{"-scenario", "otp-guessing", "-attempts", "10001"}, "-attempts must be in [1, 10000]"},
		{"negative ceiling", []string{"-scenario", "otp-guessing", "-phone-ceiling", "-1"}, "-phone-ceiling"},
		{"negative send limit", []string{"-scenario", "otp-guessing", "-send-limit", "-1"}, "-send-limit"},
		{"area code out of range", []string{"-scenario", "otp-pumping", "-area-code", "100"}, "-area-code must be 0 or in [200, 999], got 100"},
		{"area code not a block", []string{"-scenario", "otp-pumping", "-phones", otpPhonesPath, "-area-code", "211"}, "-area-code 211: its 555-0100..0199 numbers are not one range"},
		{"missing phones", []string{"-scenario", "otp-pumping", "-phones", "does-not-exist.csv"}, "reading phone numbers"},
		{"too many foreign", []string{"-scenario", "otp-pumping", "-phones", otpPhonesPath, "-foreign-numbers", "1000"}, "-foreign-numbers 1000, but only"},
		{"pumping over -requests", []string{"-scenario", "otp-pumping", "-phones", otpPhonesPath, "-requests", "135"}, "needs 136 requests (100 block sends, 36 foreign sends)"},
		{"guessing over -requests", []string{"-scenario", "otp-guessing", "-requests", "2000"}, "needs up to 2001 requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTool(t, tt.args...)
			if code != exitError || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitError, tt.wantErr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}
