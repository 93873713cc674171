package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/edge-gateway/edge/builtin"
)

// The seams between the body identities the edge reads and the ones an
// origin acts on (docs/body-identities.md), through the real server on
// loopback with the shipped policies.hcl in front of the demo origin. The
// demo origin reads a body the way permissive stacks do: JSON when the
// type mentions json, a form when the type starts with the form type
// (fasthttp's PostArgs), so it is the origin of bypass 1.

// postBody sends a POST with exactly the given Content-Type (none when
// ct is "") and extra header pairs, from the client address from.
func postBody(t *testing.T, url, ct, body, from string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set("X-Forwarded-For", from)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// bypass1Types are the Content-Type spellings of bypass 1: each starts
// with the form type, so an origin that goes by the prefix reads a form,
// while the edge used to read the body as JSON.
var bypass1Types = []string{
	"application/x-www-form-urlencoded,x",
	"application/x-www-form-urlencoded x",
	"application/x-www-form-urlencodedfoo",
	"application/x-www-form-urlencoded/",
}

// TestBypass1FormTypeVariants is issue 9's bypass 1: a JSON body whose
// Content-Type only starts with the form type, holding a decoy phone for
// the edge and, inside a string, a form for the origin. Every such send
// and verify is refused with 400 (an invalid identity) before the origin;
// the victim's number gets no more texts than its limit (3 per 15
// minutes), whichever country it is in, and a challenge no more guesses
// than its 5.
func TestBypass1FormTypeVariants(t *testing.T) {
	for _, ct := range bypass1Types {
		t.Run(ct, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: clk})
			url := "http://" + n.addr
			client := 0
			from := func() string { client++; return fmt.Sprintf("198.51.%d.%d", client/250, client%250+1) }

			// A victim abroad (RU, which the policy does not text) and one
			// at home, each behind twenty decoys.
			for _, victim := range []string{"+79161234567", "+12025550177"} {
				before := n.hits(t)["/otp/send"]
				for i := range 20 {
					body := fmt.Sprintf(`{"phone":"+1202555%04d","a":"&phone=%s&b="}`, 1000+i, strings.ReplaceAll(victim, "+", "%2B"))
					if r := postBody(t, url+"/otp/send", ct, body, from()); r.status != 400 {
						t.Errorf("send %d for %s: got %d %q, want 400", i+1, victim, r.status, r.body)
					}
				}
				if got := n.hits(t)["/otp/send"] - before; got != 0 {
					t.Errorf("%d decoyed sends for %s reached the origin, want 0", got, victim)
				}
			}
			if got := n.decisions("otp-send-per-phone", "invalid_identity"); got != 40 {
				t.Errorf("otp-send-per-phone counted %d invalid identities, want 40", got)
			}

			// The home victim still gets exactly its three texts.
			var id, code string
			for i := range 4 {
				r := postBody(t, url+"/otp/send", "application/json", `{"phone":"+12025550177"}`, from())
				want := 200
				if i == 3 {
					want = 429
				}
				if r.status != want {
					t.Fatalf("plain send %d: got %d %q, want %d", i+1, r.status, r.body, want)
				}
				if i == 0 {
					var c struct {
						ID   string `json:"challenge_id"`
						Code string `json:"demo_code"`
					}
					if err := json.Unmarshal([]byte(r.body), &c); err != nil {
						t.Fatal(err)
					}
					id, code = c.ID, c.Code
				}
			}
			if got := n.hits(t)["/otp/send"]; got != 3 {
				t.Errorf("the origin sent %d texts, want the victim's limit of 3", got)
			}

			// A hundred guesses at the victim's first challenge, each behind
			// a fresh decoy session.
			for i := range 100 {
				guess := fmt.Sprintf("%06d", i)
				if guess == code {
					guess = "999999x"
				}
				body := fmt.Sprintf(`{"phone":"+1202555%04d","challenge_id":"decoy%d","code":"1","a":"&phone=%%2B12025550177&challenge_id=%s&code=%s&b="}`, 2000+i, i, id, guess)
				if r := postBody(t, url+"/otp/verify", ct, body, from()); r.status != 400 {
					t.Errorf("verify %d: got %d %q, want 400", i+1, r.status, r.body)
				}
			}
			if got := n.hits(t)["/otp/verify"]; got != 0 {
				t.Errorf("%d decoyed guesses reached the origin, want 0", got)
			}
			// The challenge's own five guesses are intact.
			for i := range 6 {
				body := fmt.Sprintf(`{"phone":"+12025550177","challenge_id":%q,"code":"x%d"}`, id, i)
				r := postBody(t, url+"/otp/verify", "application/json", body, from())
				want := 401
				if i == 5 {
					want = 429
				}
				if r.status != want {
					t.Errorf("plain guess %d: got %d %q, want %d", i+1, r.status, r.body, want)
				}
			}
			if got := n.hits(t)["/otp/verify"]; got != 5 {
				t.Errorf("the origin saw %d guesses, want the challenge's 5", got)
			}
		})
	}
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// utf16LE encodes s as UTF-16LE.
func utf16LE(s string) string {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return string(b)
}

// TestBodySeams: every seam of docs/body-identities.md, one request each
// to /otp/send under the shipped policy. A request an origin could read
// as another phone than the edge's is refused with 400 as an invalid
// identity and never reaches the origin; one every origin reads as the
// edge does is forwarded.
func TestBodySeams(t *testing.T) {
	const (
		decoy    = `{"phone":"+12025550100"}`
		victimQ  = "phone=%2B12025550177"
		multiprt = "--XyZ\r\nContent-Disposition: form-data; name=\"phone\"\r\n\r\n+12025550177\r\n--XyZ--\r\n"
	)
	tests := []struct {
		name   string
		query  string
		ct     string
		body   string
		header []string
		want   int // 200: forwarded; 400: an invalid identity
	}{
		{name: "json", ct: "application/json", body: decoy, want: 200},
		{name: "json, utf-8", ct: "application/json; charset=UTF-8", body: decoy, want: 200},
		{name: "json, quoted utf-8", ct: `application/json;charset="utf-8"`, body: decoy, want: 200},
		{name: "vendor json", ct: "application/vnd.api+json", body: decoy, want: 200},
		{name: "form", ct: "application/x-www-form-urlencoded", body: victimQ, want: 200},
		{name: "form, upper case", ct: "Application/X-WWW-Form-Urlencoded; charset=utf-8", body: victimQ, want: 200},

		// §1: Content-Type.
		{name: "json, a list", ct: "application/json, application/x-www-form-urlencoded", body: decoy, want: 400},
		{name: "json, latin1", ct: "application/json; charset=latin1", body: decoy, want: 400},
		{name: "form, latin1", ct: "application/x-www-form-urlencoded; charset=iso-8859-1", body: victimQ, want: 400},
		{name: "json, charset twice", ct: "application/json; charset=utf-8; charset=utf-16", body: decoy, want: 400},
		{name: "text/plain", ct: "text/plain", body: decoy, want: 400},
		{name: "text/json", ct: "text/json", body: decoy, want: 400},
		{name: "form typed, JSON body", ct: "application/x-www-form-urlencoded", body: `{"phone":"+12025550100","a":"&phone=%2B12025550177&b="}`, want: 400},
		// §2: no Content-Type, multipart.
		{name: "no type", body: decoy, want: 400},
		{name: "no type, form body", body: victimQ, want: 400},
		{name: "multipart", ct: "multipart/form-data; boundary=XyZ", body: multiprt, want: 400},
		// §3: Content-Encoding.
		{name: "gzip", ct: "application/json", body: gzipped(t, decoy), header: []string{"Content-Encoding", "gzip"}, want: 400},
		{name: "identity coding", ct: "application/json", body: decoy, header: []string{"Content-Encoding", "identity"}, want: 400},
		// §4: JSON.
		{name: "json BOM", ct: "application/json", body: "\uFEFF" + decoy, want: 400},
		{name: "json duplicate", ct: "application/json", body: `{"phone":"+12025550100","phone":"+12025550177"}`, want: 400},
		{name: "json folded duplicate", ct: "application/json", body: `{"phone":"+12025550100","PHONE":"+12025550177"}`, want: 400},
		{name: "json object", ct: "application/json", body: `{"phone":{"n":"+12025550100"}}`, want: 400},
		{name: "json array", ct: "application/json", body: `{"phone":["+12025550100"]}`, want: 400},
		{name: "json NUL", ct: "application/json", body: `{"phone":"+12025550100\u0000"}`, want: 400},
		{name: "json lone surrogate", ct: "application/json", body: `{"x":"\udc00","phone":"+12025550100"}`, want: 400},
		{name: "json invalid UTF-8", ct: "application/json", body: "{\"x\":\"\xff\",\"phone\":\"+12025550100\"}", want: 400},
		{name: "json overlong UTF-8", ct: "application/json", body: "{\"x\":\"\xc0\xaf\",\"phone\":\"+12025550100\"}", want: 400},
		// PHP's parse_str(php://input) reads any body as a form.
		{name: "json read as a form", ct: "application/json", body: `{"phone":"+12025550100","a":"&phone=%2B12025550177&b="}`, want: 400},
		{name: "json read as a form, json lacks it", ct: "application/json", body: `{"a":"&phone=%2B12025550177&b="}`, want: 400},
		{name: "json with & and = elsewhere", ct: "application/json", body: `{"phone":"+12025550100","next":"/a?b=1&c=2"}`, want: 200},
		// Python's json.loads reads UTF-16 bodies whatever the type says.
		{name: "UTF-16 JSON as a form", ct: "application/x-www-form-urlencoded", body: utf16LE("\uFEFF{\"phone\":\"+12025550177\"}"), want: 400},
		{name: "UTF-16 JSON without a mark as a form", ct: "application/x-www-form-urlencoded", body: utf16LE(`{"phone":"+12025550177"}`), want: 400},
		{name: "UTF-16 JSON as JSON", ct: "application/json", body: utf16LE(`{"phone":"+12025550177"}`), want: 400},
		// §5: forms.
		{name: "form duplicate", ct: "application/x-www-form-urlencoded", body: "phone=%2B12025550100&" + victimQ, want: 400},
		{name: "form array", ct: "application/x-www-form-urlencoded", body: "phone[]=%2B12025550100", want: 400},
		{name: "form Rack spelling", ct: "application/x-www-form-urlencoded", body: "phone=%2B12025550100&[phone]=%2B12025550177", want: 400},
		{name: "form PHP spelling", ct: "application/x-www-form-urlencoded", body: "phone=%2B12025550100&+phone=%2B12025550177", want: 400},
		{name: "form semicolon", ct: "application/x-www-form-urlencoded", body: "phone=%2B12025550100;phone=%2B12025550177", want: 400},
		{name: "form NUL", ct: "application/x-www-form-urlencoded", body: "phone=%2B12025550100%00", want: 400},
		{name: "form invalid UTF-8", ct: "application/x-www-form-urlencoded", body: "phone=%2B12025550100%C0%AF", want: 400},
		// §6: the query and cookies.
		{name: "query, another phone", query: victimQ, ct: "application/json", body: decoy, want: 400},
		{name: "query, same phone", query: "phone=%2B12025550100", ct: "application/json", body: decoy, want: 200},
		{name: "query only", query: victimQ, ct: "application/json", body: `{"x":1}`, want: 400},
		{name: "query only, no body", query: victimQ, want: 400},
		{name: "query, PHP spelling", query: "+phone=%2B12025550177", ct: "application/json", body: decoy, want: 400},
		{name: "query, Rack spelling", query: "[phone]=%2B12025550177", ct: "application/json", body: decoy, want: 400},
		{name: "query, array", query: "phone[]=%2B12025550100", ct: "application/json", body: decoy, want: 400},
		{name: "query, semicolon", query: "x=1;" + victimQ, ct: "application/json", body: decoy, want: 400},
		{name: "query, form body", query: victimQ, ct: "application/x-www-form-urlencoded", body: "phone=%2B12025550100", want: 400},
		{name: "query, other names", query: "utm=1&phones=2", ct: "application/json", body: decoy, want: 200},
		{name: "cookie, another phone", ct: "application/json", body: decoy, header: []string{"Cookie", "a=1; phone=%2B12025550177"}, want: 400},
		{name: "cookie, same phone", ct: "application/json", body: decoy, header: []string{"Cookie", "phone=%2B12025550100"}, want: 200},
		{name: "cookie, PHP spelling", ct: "application/json", body: decoy, header: []string{"Cookie", "a=1", "Cookie", " phone.=x"}, want: 200},
		{name: "cookie, second line", ct: "application/json", body: decoy, header: []string{"Cookie", "a=1", "Cookie", "phone=%2B12025550177"}, want: 400},
		{name: "cookie, other names", ct: "application/json", body: decoy, header: []string{"Cookie", "phones=1; xphone=2"}, want: 200},
	}
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{clock: clk})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Advance(time.Hour) // every phone's window is over
			url := "http://" + n.addr + "/otp/send"
			if tt.query != "" {
				url += "?" + tt.query
			}
			before := n.hits(t)["/otp/send"]
			invalid := n.decisions("otp-send-per-phone", "invalid_identity")
			r := postBody(t, url, tt.ct, tt.body, fmt.Sprintf("203.0.113.%d", i+1), tt.header...)
			if r.status != tt.want {
				t.Fatalf("got %d %q, want %d", r.status, r.body, tt.want)
			}
			reached := n.hits(t)["/otp/send"] - before
			gotInvalid := n.decisions("otp-send-per-phone", "invalid_identity") - invalid
			switch tt.want {
			case 200:
				if reached != 1 {
					t.Errorf("forwarded, but the origin saw %d requests", reached)
				}
			case 400:
				if reached != 0 || gotInvalid != 1 {
					t.Errorf("refused: the origin saw %d requests, invalid identities counted %d; want 0 and 1", reached, gotInvalid)
				}
			}
		})
	}
}

// TestBodySeamsOnANonSensitiveRule: a rule that skips a request without
// the identity (missing_identity = "skip") must not skip one whose body
// the origin reads another way: a multipart or encoded body, or a phone
// only in the query, is invalid (400 by invalid_identity's default), never
// missing, or the origin would text a number no counter saw.
func TestBodySeamsOnANonSensitiveRule(t *testing.T) {
	p, diags := builtin.Load("inline.hcl", []byte(`
edge {
  trusted_proxies = ["127.0.0.1/32", "::1/128"]
}
identity {
  phone        = ["json:phone", "form:phone"]
  phone_region = "US"
}
rule "otp-send-per-phone" {
  methods          = ["POST"]
  paths            = ["/otp/send"]
  key              = ["phone"]
  algorithm        = "sliding_log"
  limit            = 3
  period           = "15m"
  missing_identity = "skip"
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	n := startNode(t, p, nodeOptions{clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}})
	url := "http://" + n.addr + "/otp/send"
	tests := []struct {
		name, query, ct, body string
		header                []string
	}{
		{name: "multipart", ct: "multipart/form-data; boundary=XyZ", body: "--XyZ\r\nContent-Disposition: form-data; name=\"phone\"\r\n\r\n+12025550177\r\n--XyZ--\r\n"},
		{name: "gzip", ct: "application/json", body: gzipped(t, `{"phone":"+12025550177"}`), header: []string{"Content-Encoding", "gzip"}},
		{name: "query only", query: "?phone=%2B12025550177", ct: "application/json", body: `{}`},
		{name: "query, no body", query: "?phone=%2B12025550177"},
		{name: "no type", body: "phone=%2B12025550177"},
	}
	for i, tt := range tests {
		r := postBody(t, url+tt.query, tt.ct, tt.body, fmt.Sprintf("192.0.2.%d", i+1), tt.header...)
		if r.status != 400 {
			t.Errorf("%s: got %d %q, want 400", tt.name, r.status, r.body)
		}
	}
	if got := n.hits(t)["/otp/send"]; got != 0 {
		t.Errorf("the origin saw %d sends the per-phone rule skipped, want 0", got)
	}
	// A request with no phone anywhere is still skipped, as the rule says.
	if r := postBody(t, url, "application/json", `{"x":1}`, "192.0.2.100"); r.status != 400 {
		t.Errorf("no phone: got %d %q, want the origin's 400 (missing phone)", r.status, r.body)
	}
	if got := n.hits(t)["/otp/send"]; got != 1 {
		t.Errorf("the origin saw %d sends, want the one without a phone", got)
	}
}

// TestRoutesWithoutBodyIdentitiesReadNoCookiesOrBody: the body, query and
// cookie checks run only where a rule needs a body identity.
func TestRoutesWithoutBodyIdentitiesReadNoCookiesOrBody(t *testing.T) {
	n := startNode(t, loadPolicy(t, "policies.hcl"), nodeOptions{})
	for _, ct := range append([]string{"", "multipart/form-data; boundary=x"}, bypass1Types...) {
		r := postBody(t, "http://"+n.addr+"/api/orders?phone=1", ct, `{"phone":"+12025550100"}`, "192.0.2.1", "Cookie", "phone=2", "Content-Encoding", "gzip")
		if r.status != 200 {
			t.Errorf("%q on /api/orders: got %d %q, want 200", ct, r.status, r.body)
		}
	}
	if got := n.bodyParses(); got != 0 {
		t.Errorf("body parsed %d times on a route without body identities", got)
	}
}
