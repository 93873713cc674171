package gateway

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules"
)

// The OTP tests of issue 5, through the real server on loopback with
// otp.hcl in front of the demo origin, with a fake clock.

const otpPolicy = "testdata/fixtures/policies/otp.hcl"

// policyTests is the part of a policy file the runner reads: its test
// blocks (the rest of the file is left to rules.Load).
type policyTests struct {
	Tests []struct {
		Name     string `hcl:"name,label"`
		Requests []struct {
			After        *string        `hcl:"after,optional"`
			Method       string         `hcl:"method"`
			Path         string         `hcl:"path"`
			From         string         `hcl:"from"`
			JSON         hcl.Expression `hcl:"json,optional"`
			Form         hcl.Expression `hcl:"form,optional"`
			Headers      hcl.Expression `hcl:"headers,optional"`
			OriginStatus *int           `hcl:"origin_status,optional"`
			Repeat       *int           `hcl:"repeat,optional"`
			Expect       string         `hcl:"expect"`
			Rule         *string        `hcl:"rule,optional"`
		} `hcl:"request,block"`
	} `hcl:"test,block"`
	Rest hcl.Body `hcl:",remain"`
}

func stringMap(t *testing.T, expr hcl.Expression) map[string]string {
	t.Helper()
	if expr == nil {
		return nil
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if v.IsNull() {
		return nil
	}
	out := map[string]string{}
	for k, x := range v.AsValueMap() {
		switch x.Type() {
		case cty.String:
			out[k] = x.AsString()
		case cty.Number:
			out[k] = x.AsBigFloat().Text('f', -1)
		default:
			t.Fatalf("value of %s is %s", k, x.Type().FriendlyName())
		}
	}
	return out
}

// TestFullPolicyOTPTestBlocks runs the OTP test blocks of full.hcl as
// expected values, through the server on otp.hcl (edge test comes later).
func TestFullPolicyOTPTestBlocks(t *testing.T) {
	path := filepath.Join(repoRoot(t), "testdata/fixtures/policies/full.hcl")
	f, diags := hclparse.NewParser().ParseHCLFile(path)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var pt policyTests
	if diags := gohcl.DecodeBody(f.Body, nil, &pt); diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ran := 0
	for _, tc := range pt.Tests {
		otpOnly := true
		for _, r := range tc.Requests {
			otpOnly = otpOnly && strings.HasPrefix(r.Path, "/otp/")
		}
		if !otpOnly {
			continue // login, signup: later issues
		}
		ran++
		t.Run(tc.Name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			n := startNode(t, loadPolicy(t, otpPolicy), nodeOptions{clock: clk})
			for i, r := range tc.Requests {
				if r.After != nil {
					d, err := time.ParseDuration(*r.After)
					if err != nil {
						t.Fatal(err)
					}
					clk.Advance(d)
				}
				repeat := 1
				if r.Repeat != nil {
					repeat = *r.Repeat
				}
				for j := range repeat {
					var denyBefore int
					if r.Rule != nil {
						denyBefore = n.decisions(*r.Rule, "deny")
					}
					header := []string{"X-Forwarded-For", r.From}
					for k, v := range stringMap(t, r.Headers) {
						header = append(header, k, v)
					}
					body := ""
					if m := stringMap(t, r.JSON); m != nil {
						b, _ := json.Marshal(m)
						body = string(b)
					} else if m := stringMap(t, r.Form); m != nil {
						vals := url.Values{}
						for k, v := range m {
							vals.Set(k, v)
						}
						body = vals.Encode()
						header = append(header, "Content-Type", "application/x-www-form-urlencoded")
					}
					resp := do(t, r.Method, "http://"+n.addr+r.Path, body, header...)
					got := map[int]string{429: "deny", 400: "reject", 503: "error_deny"}[resp.status]
					if got == "" {
						got = "allow"
						if r.OriginStatus != nil && resp.status != *r.OriginStatus {
							t.Errorf("request %d.%d: origin answered %d, the test says %d", i, j, resp.status, *r.OriginStatus)
						}
					}
					if got != r.Expect {
						t.Fatalf("request %d.%d (%s %s from %s %s): got %s (%d %q), want %s", i, j, r.Method, r.Path, r.From, body, got, resp.status, resp.body, r.Expect)
					}
					if r.Rule != nil && n.decisions(*r.Rule, "deny") != denyBefore+1 {
						t.Errorf("request %d.%d: refused, but not by rule %q", i, j, *r.Rule)
					}
				}
			}
		})
	}
	if ran != 4 {
		t.Fatalf("ran %d OTP test blocks, want the 4 of full.hcl", ran)
	}
}

// TestEveryPhoneFormatSharesOneBucket sends each number of
// normalization-cases.csv in all its formats the edge can read (with the
// policy's default region US): three sends pass, every other format is the
// same phone and is refused by otp-send-per-phone.
func TestEveryPhoneFormatSharesOneBucket(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot(t), "testdata/data/phones/normalization-cases.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	formats := map[string][]string{} // E.164 → inputs
	var order []string
	for _, r := range rows[1:] {
		region := r[col["default_region"]]
		if r[col["parse_error"]] != "" || r[col["is_possible"]] != "true" || (region != "" && region != "US") {
			continue
		}
		e := r[col["e164"]]
		if _, ok := formats[e]; !ok {
			order = append(order, e)
		}
		formats[e] = append(formats[e], r[col["input"]])
	}
	if len(order) < 20 {
		t.Fatalf("only %d numbers with several formats", len(order))
	}
	// The country allow-list is not what this test is about.
	p := loadPolicy(t, otpPolicy, `rule "otp-send-countries" {`, `rule "otp-send-countries" {
  dry_run = true`)
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	n := startNode(t, p, nodeOptions{clock: clk})
	client, checked := 0, 0
	for _, e := range order {
		inputs := formats[e]
		if len(inputs) < 2 {
			continue
		}
		checked++
		clk.Advance(2 * time.Hour) // every window of the previous number is over
		for i := range max(len(inputs), 4) {
			in := inputs[i%len(inputs)]
			client++
			b, _ := json.Marshal(map[string]string{"phone": in})
			r := do(t, "POST", "http://"+n.addr+"/otp/send", string(b), "X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", client>>16&255, client>>8&255, client&255))
			want := 200
			if i >= 3 {
				want = 429
			}
			if r.status != want {
				t.Errorf("%s as %q (send %d): got %d, want %d", e, in, i+1, r.status, want)
			}
		}
	}
	t.Logf("%d numbers, each in all its formats", checked)
}

// TestOTPGuesserHeldToThePhonesCeiling: 1,000 verify attempts against one
// phone, from ever-changing addresses, re-sending a code whenever refused,
// get at most the phone's ceiling (15 an hour, counting attempts) through
// to the origin.
func TestOTPGuesserHeldToThePhonesCeiling(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	n := startNode(t, loadPolicy(t, otpPolicy), nodeOptions{clock: clk})
	const phone = "+12025550199"
	send := func(i int) (string, string) {
		r := do(t, "POST", "http://"+n.addr+"/otp/send", `{"phone":"`+phone+`"}`, "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i%250))
		var c struct {
			ID   string `json:"challenge_id"`
			Code string `json:"demo_code"`
		}
		if r.status == 200 {
			_ = json.Unmarshal([]byte(r.body), &c)
		}
		return c.ID, c.Code
	}
	id, code := send(0)
	sends := 1
	for i := range 1000 {
		guess := fmt.Sprintf("%06d", i)
		if guess == code {
			guess = "999999x"
		}
		body := fmt.Sprintf(`{"phone":%q,"challenge_id":%q,"code":%q}`, phone, id, guess)
		r := do(t, "POST", "http://"+n.addr+"/otp/verify", body, "X-Forwarded-For", fmt.Sprintf("203.0.%d.%d", i/250, i%250))
		if r.status == 429 {
			if nid, ncode := send(i + 1); nid != "" {
				id, code = nid, ncode
				sends++
			}
		}
	}
	// The bound is the phone's ceiling, 15. Refused attempts count too
	// (count = "attempts"): each code's sixth guess, refused by its
	// session's 5, spends one of the 15, so 5 + 5 + 3 = 13 reach the origin.
	got := n.hits(t)["/otp/verify"]
	if got > 15 {
		t.Errorf("the origin saw %d verify attempts, over the phone's ceiling of 15", got)
	}
	if got != 13 {
		t.Errorf("the origin saw %d verify attempts, want 13 (5 + 5 + 3)", got)
	}
	if got := n.hits(t)["/otp/send"]; got != 3 || sends != 3 {
		t.Errorf("the origin sent %d codes (%d), want 3 (3 per 15 minutes per phone)", got, sends)
	}
}

// TestBodyIsNotParsedWithoutAnIdentityRule: routes with no identity rule
// never parse the body.
func TestBodyIsNotParsedWithoutAnIdentityRule(t *testing.T) {
	n := startNode(t, loadPolicy(t, otpPolicy), nodeOptions{})
	do(t, "POST", "http://"+n.addr+"/api/x", `{"phone":"+12025550100"}`)
	do(t, "POST", "http://"+n.addr+"/otp/send", `{"phone":"+12025550100"}`)
	if got, want := n.bodyParses(), 1; got != want {
		t.Errorf("body parsed %d times, want %d (only /otp/send has identity rules)", got, want)
	}
}

// TestOTPUnparsablePhoneGetsOneAnswer: a phone field that is not a phone
// number is answered 400 with the same problem body whatever country rule
// the policy has and wherever it stands (the shipped policies.hcl, an
// allow-list rule ahead of a per-client rule and nothing keyed on the
// phone, a block-list rule alone), never reaches the origin, and is charged
// to the per-client rule, so a client that sent garbage up to its limit is
// refused its next valid send. Valid numbers are decided as before: an
// allowed country is forwarded, RU is refused with the bare 429.
func TestOTPUnparsablePhoneGetsOneAnswer(t *testing.T) {
	const identity = `
edge {
  trusted_proxies = ["127.0.0.1/32", "::1/128"]
}
identity {
  phone        = ["json:phone", "form:phone"]
  phone_region = "US"
}
`
	const perClient = `
rule "otp-send-per-client" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["ip"]
  algorithm = "sliding_window"
  limit     = 5
  period    = "1h"
  sensitive = true
}
`
	countries := func(cond string) string {
		return `
rule "otp-send-countries" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  action    = "deny"
  sensitive = true
  when {
    ` + cond + `
  }
}
`
	}
	inline := func(t *testing.T, src string) *rules.Policy {
		t.Helper()
		p, diags := builtin.Load("inline.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return p
	}
	tests := []struct {
		name      string
		policy    func(t *testing.T) *rules.Policy
		perClient int // the per-client rule's limit
	}{
		{"shipped policies.hcl", func(t *testing.T) *rules.Policy { return loadPolicy(t, "policies.hcl") }, 20},
		{"allow list first, nothing keyed on the phone", func(t *testing.T) *rules.Policy {
			return inline(t, identity+countries(`phone_country_not_in = ["US", "CA", "GB"]`)+perClient)
		}, 5},
		{"block list last, nothing keyed on the phone", func(t *testing.T) *rules.Policy {
			return inline(t, identity+perClient+countries(`phone_country_in = ["RU"]`))
		}, 5},
	}
	garbage := []string{"+44 7700 900123x", "call me 5550199", "call me maybe", "+1 202 5a55 0100", "2025550100*"}
	var first *reply // the first 400, which every other must equal
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := startNode(t, tt.policy(t), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
			client := 0
			send := func(from, phone string) reply {
				t.Helper()
				if from == "" {
					client++
					from = fmt.Sprintf("198.51.100.%d", client)
				}
				b, _ := json.Marshal(map[string]string{"phone": phone})
				return do(t, "POST", "http://"+n.addr+"/otp/send", string(b), "X-Forwarded-For", from)
			}
			rejected := func(what string, r reply) {
				t.Helper()
				if r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" ||
					r.header.Get("Retry-After") != "" || r.header.Get("RateLimit") != "" {
					t.Errorf("%s: got %d %v %q, want the 400 problem", what, r.status, r.header, r.body)
					return
				}
				if first == nil {
					first = &r
				} else if r.body != first.body {
					t.Errorf("%s: got body %q, want %q (one answer for garbage)", what, r.body, first.body)
				}
			}
			for _, ph := range garbage {
				rejected(fmt.Sprintf("%q", ph), send("", ph))
			}
			if got := n.hits(t)["/otp/send"]; got != 0 {
				t.Fatalf("the origin saw %d sends of garbage, want 0", got)
			}
			if r := send("", "+1 (202) 555-0100"); r.status != 200 {
				t.Errorf("allowed US number: got %d %q, want 200", r.status, r.body)
			}
			if r := send("", "+7 912 345-67-89"); r.status != 429 || r.body != "Too Many Requests\n" {
				t.Errorf("RU number: got %d %q, want the bare 429", r.status, r.body)
			}
			// Garbage is charged to the per-client rule as an attempt.
			const garbler = "203.0.113.7"
			for i := range tt.perClient {
				rejected(fmt.Sprintf("garbage #%d from one client", i+1), send(garbler, garbage[i%len(garbage)]))
			}
			if r := send(garbler, "+1 202 555 0177"); r.status != 429 || r.body != "Too Many Requests\n" {
				t.Errorf("valid send after %d rejected ones: got %d %q, want the bare 429 (per-client spent)", tt.perClient, r.status, r.body)
			}
			if r := send("", "+1 202 555 0177"); r.status != 200 {
				t.Errorf("the same number from another client: got %d %q, want 200", r.status, r.body)
			}
			if got := n.hits(t)["/otp/send"]; got != 2 {
				t.Errorf("the origin saw %d sends, want the 2 valid allowed ones", got)
			}
		})
	}
}

// TestOTPBodyReadTwoWaysIsRefused: a body sent as a form that starts as
// JSON reads as one phone number to an origin that goes by Content-Type
// (the demo origin, most frameworks) and as another to one that decodes
// JSON whatever the type. The edge refuses it (invalid identity, 400)
// rather than count one number while the origin texts the other, which let
// a client text a victim past the per-phone limit by naming a decoy.
func TestOTPBodyReadTwoWaysIsRefused(t *testing.T) {
	n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	post := func(ct, body, from string) reply {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+n.addr+"/otp/send", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("X-Forwarded-For", from)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{resp.StatusCode, resp.Header, string(b)}
	}
	const form = "application/x-www-form-urlencoded"
	for i := range 8 {
		body := fmt.Sprintf(`{"a":"&phone=%%2B14155550142&b=","phone":"+1312555%04d"}`, 1000+i)
		if r := post(form, body, fmt.Sprintf("198.51.100.%d", i+1)); r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("decoy %d: got %d %q, want the 400 problem", i, r.status, r.body)
		}
	}
	if got := n.hits(t)["/otp/send"]; got != 0 {
		t.Fatalf("the origin saw %d sends of two-way bodies, want 0", got)
	}
	// Each way on its own is read as always.
	if r := post(form, "phone=%2B14155550142", "198.51.100.50"); r.status != 200 {
		t.Errorf("a form: got %d %q, want 200", r.status, r.body)
	}
	if r := post("application/json", `{"phone":"+14155550142"}`, "198.51.100.51"); r.status != 200 {
		t.Errorf("JSON: got %d %q, want 200", r.status, r.body)
	}
	// JSON sent as text/plain is refused too: an origin that decodes JSON
	// whatever the type reads a phone, one that goes by the type reads
	// none (docs/body-identities.md §1).
	if r := post("text/plain", `{"phone":"+14155550142"}`, "198.51.100.52"); r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("JSON sent as text/plain: got %d %q, want the 400 problem", r.status, r.body)
	}
	if got := n.hits(t)["/otp/send"]; got != 2 {
		t.Errorf("the origin saw %d sends, want the 2 forwarded ones", got)
	}
}
