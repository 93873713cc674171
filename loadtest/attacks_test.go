package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/nyaruka/phonenumbers"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/otp"
	"github.com/edge-gateway/edge/rules"
)

func TestAttackAllowance(t *testing.T) {
	t.Parallel()
	// 12:00:00.5 UTC: half a second into a one-second window, on an hour
	// boundary for the hour-long ones.
	t0 := time.Date(2026, 1, 2, 12, 0, 0, 500_000_000, time.UTC)
	us := func(d time.Duration) int64 { return d.Microseconds() }
	tests := []struct {
		name string
		op   rules.Op
		span time.Duration
		want int64
	}{
		{"gcra burst only", rules.Op{Algorithm: rules.GCRA, Limit: 5, Burst: 5, PeriodUS: us(time.Minute)}, 11 * time.Second, 5},
		{"gcra one refill", rules.Op{Algorithm: rules.GCRA, Limit: 5, Burst: 5, PeriodUS: us(time.Minute)}, 12 * time.Second, 6},
		{"gcra interval in whole µs", rules.Op{Algorithm: rules.GCRA, Limit: 3, Burst: 1, PeriodUS: us(time.Second)}, time.Second, 1 + 1_000_000/333_333},
		{"token bucket", rules.Op{Algorithm: rules.TokenBucket, Limit: 60, Burst: 20, PeriodUS: us(time.Minute)}, 2500 * time.Millisecond, 22},
		{"leaky bucket", rules.Op{Algorithm: rules.LeakyBucket, Limit: 60, Burst: 20, PeriodUS: us(time.Minute)}, 999 * time.Millisecond, 20},
		{"sliding window, one window", rules.Op{Algorithm: rules.SlidingWindow, Limit: 10, PeriodUS: us(time.Second)}, 400 * time.Millisecond, 10},
		{"sliding window, across a boundary", rules.Op{Algorithm: rules.SlidingWindow, Limit: 10, PeriodUS: us(time.Second)}, 600 * time.Millisecond, 20},
		{"fixed window, three windows", rules.Op{Algorithm: rules.FixedWindow, Limit: 10, PeriodUS: us(time.Second)}, 1600 * time.Millisecond, 30},
		{"fixed window, a calendar day counts one more", rules.Op{Algorithm: rules.FixedWindow, Limit: 10, PeriodUS: us(24 * time.Hour)}, time.Second, 20},
		{"sliding log, under a period", rules.Op{Algorithm: rules.SlidingLog, Limit: 3, PeriodUS: us(15 * time.Minute)}, 14 * time.Minute, 3},
		{"sliding log, a period", rules.Op{Algorithm: rules.SlidingLog, Limit: 3, PeriodUS: us(15 * time.Minute)}, 15 * time.Minute, 6},
		{"unknown algorithm: unbounded", rules.Op{Algorithm: rules.Distinct, Limit: 3, PeriodUS: us(time.Minute)}, time.Second, 1 << 62},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := allowance(tt.op, t0, t0.Add(tt.span)); got != tt.want {
				t.Errorf("allowance over %v: got %d, want %d", tt.span, got, tt.want)
			}
		})
	}
}

func TestAttackCaseBound(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 12, 0, 0, 500_000_000, time.UTC)
	gcra := rules.Op{Algorithm: rules.GCRA, Limit: 5, Burst: 5, PeriodUS: time.Minute.Microseconds()}
	window := rules.Op{Algorithm: rules.SlidingWindow, Limit: 100, PeriodUS: time.Hour.Microseconds()}
	key := func(b byte) rules.Key { return rules.Key{b} }
	perVisitor := func(k byte) constraint { return constraint{role: 0, name: "per-visitor", key: key(k), op: gcra} }
	perNetwork := constraint{role: 2, name: "per-network", key: key(200), op: window}
	many := func(n int, f func(i int) canonVerdict) []canonVerdict {
		vs := make([]canonVerdict, n)
		for i := range vs {
			vs[i] = f(i)
		}
		return vs
	}
	tests := []struct {
		name    string
		vs      []canonVerdict
		want    int64
		wantWhy string
	}{
		{"one key", many(20, func(int) canonVerdict { return canonVerdict{cons: []constraint{perVisitor(1), perNetwork}} }), 5, "per-visitor: gcra 5 per 1m0s, burst 5, 5 per key"},
		{"many keys, one network", many(150, func(i int) canonVerdict {
			return canonVerdict{cons: []constraint{perVisitor(byte(i)), perNetwork}}
		}), 100, "per-network: sliding_window 100 per 1h0m0s, 100 per key"},
		{"a key's requests below its allowance count as they are", many(6, func(i int) canonVerdict {
			return canonVerdict{cons: []constraint{perVisitor(byte(i / 3))}}
		}), 6, "no rule holds them to fewer"},
		{"requests a role does not hold", append(
			many(10, func(int) canonVerdict { return canonVerdict{cons: []constraint{perVisitor(1)}} }),
			many(3, func(int) canonVerdict { return canonVerdict{} })...), 8, "and 3 requests it does not hold"},
		{"refused outright", many(7, func(int) canonVerdict { return canonVerdict{refused: true, why: "refused outright by deny-it (deny)"} }), 0, "every one is refused outright by deny-it"},
		{"refused ones add nothing", append(
			many(10, func(int) canonVerdict { return canonVerdict{cons: []constraint{perVisitor(1)}} }),
			many(4, func(int) canonVerdict { return canonVerdict{refused: true, why: "refused outright by x (deny)"} })...), 5, "; 4 more refused outright"},
		{"no requests", nil, 0, "refuses every one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := caseBound(tt.vs, t0, t0.Add(10*time.Millisecond))
			if got.bound != tt.want || !strings.Contains(got.why, tt.wantWhy) {
				t.Errorf("got %d (%s), want %d (…%s…)", got.bound, got.why, tt.want, tt.wantWhy)
			}
		})
	}
}

// loadTestModel loads the attacks policy, or fails.
func loadTestModel(t *testing.T, path string) *policyModel {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := loadPolicyModel(path, src)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPolicyModel: the model finds in the attacks policy the rules the
// shipped policy's comments promise for each canonical request.
func TestAttackPolicyModel(t *testing.T) {
	t.Parallel()
	m := loadTestModel(t, attacksPolicyPath)
	client := m.counted(netip.MustParseAddr("2001:db8:1:2:3:4:5:6"))
	if want := netip.MustParseAddr("2001:db8:1:2::"); client != want {
		t.Fatalf("counted: got %v, want %v (the policy's /64)", client, want)
	}
	login := loginFields("attacks-victim", 0)
	// The host-limited login rules, and the account rules, which hold
	// every host (count_distinct rules bound nothing in the model:
	// login-accounts-per-ip is not listed).
	loginHost := []string{"login-per-visitor", "login-per-visitor (IP ceiling)", "login-per-network"}
	loginAccount := []string{"login-failures-account-client", "login-failures-account"}
	tests := []struct {
		name        string
		req         canonReq
		wantRefused bool
		wantRules   []string
		wantMint    bool
	}{
		{"login at the protected host", canonReq{method: "POST", path: "/login", host: attackHost, client: client, fields: login},
			false, append(slices.Clone(loginHost), loginAccount...), true},
		{"login at another host", canonReq{method: "POST", path: "/login", host: otherHost, client: client, fields: login}, false, loginAccount, true},
		{"login with a visitor ID", canonReq{method: "POST", path: "/login", host: attackHost, client: client, visitor: "an-id", fields: login},
			false, append(slices.Clone(loginHost), loginAccount...), false},
		{"login without an account", canonReq{method: "POST", path: "/login", host: attackHost, client: client}, true, nil, false},
		{"login with an empty account", canonReq{method: "POST", path: "/login", host: attackHost, client: client, fields: loginFields(" ", 0)}, true, nil, false},
		{"GET /login", canonReq{method: "GET", path: "/login", host: attackHost, client: client}, false, nil, true},
		{"signup", canonReq{method: "POST", path: "/signup", client: client, fields: map[string]string{"email": "a@example.com"}},
			false, []string{"signup-per-network", "signup-per-email"}, true},
		{"signup without an email", canonReq{method: "POST", path: "/signup", client: client}, true, nil, false},
		{"send to a US phone", canonReq{method: "POST", path: "/otp/send", client: client, fields: otpFields("+12025550100")},
			false, []string{"otp-send-per-phone", "otp-send-per-client", "otp-send-per-range"}, true},
		{"send to a Russian phone", canonReq{method: "POST", path: "/otp/send", client: client, fields: otpFields(foreignVictim)}, true, nil, false},
		{"denied path", canonReq{method: "GET", path: "/.git/config", client: client}, true, nil, false},
		{"a path no rule limits", canonReq{method: "GET", path: mintTarget, client: client}, false, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := m.decide(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range v.cons {
				names = append(names, c.name)
			}
			if v.refused != tt.wantRefused || !slices.Equal(names, tt.wantRules) || (v.mint != nil) != tt.wantMint {
				t.Errorf("got refused %v, rules %q, mint %v; want %v, %q, %v", v.refused, names, v.mint != nil, tt.wantRefused, tt.wantRules, tt.wantMint)
			}
		})
	}
}

// TestAttacksHostsPolicyIsTheShippedOne: the host-confusion policy is the
// shipped policies.hcl but for hosts on its login rules, so that the CI
// form's bounds are the shipped policy's. Update the copy when this fails.
func TestAttacksHostsPolicyIsTheShippedOne(t *testing.T) {
	t.Parallel()
	shipped := loadTestModel(t, "../policies.hcl").p
	copyP := loadTestModel(t, attacksPolicyPath).p
	type ruleView struct {
		Name                             string
		Algorithm                        rules.Algorithm
		Limit, Burst, IPCeiling          int64
		Period                           time.Duration
		Action                           rules.Action
		Sensitive, DryRun                bool
		Methods                          []string
		IPv4Prefix, IPv6Prefix           int
		Count                            rules.CountMode
		Key                              []string
		MissingIdentity, InvalidIdentity rules.IdentityMode
		OnStoreError                     rules.StoreErrorMode
		ResetOnSuccess                   bool
		FailureStatus, SuccessStatus     []int
		When                             []string
	}
	view := func(p *rules.Policy) []ruleView {
		var out []ruleView
		for _, r := range p.Rules {
			v := ruleView{Name: r.Name, Algorithm: r.Algorithm, Limit: r.Limit, Burst: r.Burst, IPCeiling: r.IPCeiling, Period: r.Period,
				Action: r.Action, Sensitive: r.Sensitive, DryRun: r.DryRun, Methods: r.Route.Methods(), IPv4Prefix: r.IPv4Prefix, IPv6Prefix: r.IPv6Prefix,
				Count: r.Count, MissingIdentity: r.MissingIdentity, InvalidIdentity: r.InvalidIdentity, OnStoreError: r.OnStoreError,
				ResetOnSuccess: r.ResetOnSuccess, FailureStatus: r.FailureStatus, SuccessStatus: r.SuccessStatus}
			v.Key = r.KeyNames
			for _, c := range r.Conditions {
				v.When = append(v.When, fmt.Sprint(c)) // each condition's String: its attribute as written
			}
			out = append(out, v)
		}
		return out
	}
	a, b := view(shipped), view(copyP)
	if len(a) != len(b) {
		t.Fatalf("%s has %d rules, policies.hcl %d", attacksPolicyPath, len(b), len(a))
	}
	for i := range a {
		ja, _ := json.Marshal(a[i])
		jb, _ := json.Marshal(b[i])
		if string(ja) != string(jb) {
			t.Errorf("rule %d differs:\n  policies.hcl: %s\n  %s: %s", i, ja, attacksPolicyPath, jb)
		}
	}
	if !equalJSON(nat.ConfigOf(shipped), nat.ConfigOf(copyP)) || !equalJSON(node.Of(shipped).Store, node.Of(copyP).Store) || !equalJSON(otp.IdentityOf(shipped), otp.IdentityOf(copyP)) ||
		shipped.IPv4Prefix != copyP.IPv4Prefix || shipped.IPv6Prefix != copyP.IPv6Prefix || shipped.ForwardedHeader != copyP.ForwardedHeader ||
		shipped.PathCaseInsensitive != copyP.PathCaseInsensitive || node.Of(shipped).Listen != node.Of(copyP).Listen || node.Of(shipped).Upstream != node.Of(copyP).Upstream {
		t.Errorf("%s's edge, store, visitor or identity settings differ from policies.hcl's (bash loadtest/testdata/make-attacks-hosts.sh writes it anew)", attacksPolicyPath)
	}
	// And the copy does limit its login rules to the host.
	m := loadTestModel(t, attacksPolicyPath)
	at := func(host string) int {
		v, err := m.decide(canonReq{method: "POST", path: "/login", host: host, client: netip.MustParseAddr("198.18.0.1"), fields: loginFields("attacks-victim", 0)})
		if err != nil {
			t.Fatal(err)
		}
		return len(v.cons)
	}
	// The visitor rule, its IP ceiling and the per-network rule are the
	// host's; the two account failure rules hold every host.
	if at(attackHost) != 5 || at(otherHost) != 2 {
		t.Errorf("login rules at %s: %d ops, at %s: %d; want 5 and 2", attackHost, at(attackHost), otherHost, at(otherHost))
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestEmbeddedForms checks each spelling against its RFC's layout, and
// that the bits an attacker varies put each in an IPv6 network of its
// own where the layout allows it.
func TestAttackEmbeddedForms(t *testing.T) {
	t.Parallel()
	v := netip.MustParseAddr("198.51.100.7")
	tests := []struct {
		name string
		f    func(netip.Addr, int) netip.Addr
		i    int
		want string
	}{
		{"6to4", sixToFour, 0, "2002:c633:6407::1"},
		{"6to4, subnet 5", sixToFour, 5, "2002:c633:6407:5::6"},
		{"nat64", nat64WellKnown, 3, "64:ff9b::c633:6407"},
		{"teredo", teredo, 0, "2001:0:4136:e378:0:63bf:39cc:9bf8"},
		{"ipv4-compatible", ipv4Compatible, 0, "::c633:6407"},
	}
	for _, tt := range tests {
		if got := tt.f(v, tt.i); got != netip.MustParseAddr(tt.want) {
			t.Errorf("%s: got %v, want %s", tt.name, got, tt.want)
		}
	}
	// Teredo stores the client inverted (RFC 4380 §4): undo it.
	tb := teredo(v, 9).As16()
	var back [4]byte
	for k := range 4 {
		back[k] = ^tb[12+k]
	}
	if netip.AddrFrom4(back) != v {
		t.Errorf("teredo: the client bits decode to %v, want %v", netip.AddrFrom4(back), v)
	}
	for _, f := range []func(netip.Addr, int) netip.Addr{teredo} {
		seen := map[netip.Prefix]bool{}
		for i := range embeddedEmbedded + embeddedNative {
			p, _ := f(v, i).Prefix(48)
			if seen[p] {
				t.Errorf("two spellings in %v", p)
			}
			seen[p] = true
		}
	}
	for i := range 24 {
		p, _ := sixToFour(v4In(netip.MustParsePrefix("198.18.5.0/24"), byte(1+i)), i).Prefix(48)
		if p.Addr().As16()[5] != byte(1+i) {
			t.Errorf("6to4 of host %d in %v", 1+i, p)
		}
	}
}

func TestAttackHeaderNaming(t *testing.T) {
	t.Parallel()
	s4 := netip.MustParseAddr("203.0.113.5")
	s6 := netip.MustParseAddr("2001:db8:5::1")
	tests := []struct {
		name    string
		headers map[string]string
		addr    netip.Addr
		want    string
	}{
		{"absent", map[string]string{"X-Forwarded-For": "198.18.0.1, 127.0.0.1"}, s4, ""},
		{"a longer address is not it", map[string]string{"X-Forwarded-For": "203.0.113.50"}, s4, ""},
		{"a longer prefix is not it", map[string]string{"X-Forwarded-For": "1203.0.113.5"}, s4, ""},
		{"in a chain", map[string]string{"X-Forwarded-For": "203.0.113.5, 198.18.0.1"}, s4, "X-Forwarded-For"},
		{"in another header", map[string]string{"X-Real-Ip": "203.0.113.5"}, s4, "X-Real-Ip"},
		{"forwarded, bracketed", map[string]string{"Forwarded": `for="[2001:db8:5::1]"`}, s6, "Forwarded"},
		{"an IPv6 one longer", map[string]string{"Forwarded": `for="[2001:db8:5::10]"`}, s6, ""},
		{"the tag is ignored", map[string]string{attackTagHeader: "2001:db8:5::1"}, s6, ""},
	}
	for _, tt := range tests {
		if got := headerNaming(originRequest{Headers: tt.headers}, tt.addr); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestAttackOriginSeesPost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method  string
		headers map[string]string
		want    bool
	}{
		{"POST", nil, true},
		{"GET", nil, false},
		{"GET", map[string]string{"X-Http-Method-Override": "POST"}, true},
		{"GET", map[string]string{"X_http_method_override": "post"}, true},
		{"GET", map[string]string{"X.HTTP.Method.Override": " Post "}, true},
		{"GET", map[string]string{"X-Method-Override": "PUT, POST"}, true},
		{"GET", map[string]string{"X-Http-Method": "PUT"}, false},
		{"GET", map[string]string{"X-Other": "POST"}, false},
		{"GET", map[string]string{"X-Http-Method-Override": "POSTAL"}, false},
	}
	for _, tt := range tests {
		if got := originSeesPost(originRequest{Method: tt.method, Headers: tt.headers}); got != tt.want {
			t.Errorf("%s %v: got %v, want %v", tt.method, tt.headers, got, tt.want)
		}
	}
}

func TestAttackOriginSeesHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		headers map[string]string
		want    bool
	}{
		{map[string]string{"Host": "login.example.com"}, true},
		{map[string]string{"Host": "LOGIN.example.COM:8080"}, true},
		{map[string]string{"Host": "login.example.com."}, true},
		{map[string]string{"Host": "x@login.example.com"}, true},
		{map[string]string{"Host": otherHost + ", login.example.com"}, true},
		{map[string]string{"Host": otherHost, "X-Forwarded-Host": "login.example.com"}, true},
		{map[string]string{"Host": otherHost, "Forwarded": `for=1.2.3.4;host="login.example.com"`}, true},
		{map[string]string{"Host": otherHost}, false},
		{map[string]string{"Host": "login.example.com.evil"}, false},
		{map[string]string{"Host": "evil-login.example.com"}, false},
		{map[string]string{}, false},
	}
	for _, tt := range tests {
		if got := originSeesHost(originRequest{Headers: tt.headers}, attackHost); got != tt.want {
			t.Errorf("%v: got %v, want %v", tt.headers, got, tt.want)
		}
	}
}

func TestAttackHeaderNamesMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want bool
	}{
		{"X-HTTP-Method-Override", "x_http_method_override", true},
		{"X.HTTP.Method.Override", "X-HTTP-Method-Override", true},
		{"X-HTTP-Method", "X-HTTP-Method-Override", false},
		{"Host", "host", true},
		{"X-Forwarded-Host", "X-Forwarded-Hosts", false},
	}
	for _, tt := range tests {
		if got := headerNamesMatch(tt.a, tt.b); got != tt.want {
			t.Errorf("%q, %q: got %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestPolyglot: bypass 1's body reads as the decoy to a JSON parser and as
// the real fields to a form parser, which is what the content-type cases
// rely on.
func TestAttackPolyglot(t *testing.T) {
	t.Parallel()
	body := polyglot(map[string]string{"phone": "+12025550100", "challenge_id": "decoy"}, []string{"phone", "challenge_id"},
		[][2]string{{"phone", "+14155550123"}, {"challenge_id", "REAL2ID"}, {"code", "123456"}})
	var js map[string]string
	if err := json.Unmarshal(body, &js); err != nil {
		t.Fatalf("%s: not JSON: %v", body, err)
	}
	if js["phone"] != "+12025550100" || js["challenge_id"] != "decoy" || js["code"] != "" {
		t.Errorf("as JSON: %v", js)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		t.Fatalf("%s: not a form: %v", body, err)
	}
	if form.Get("phone") != "+14155550123" || form.Get("challenge_id") != "REAL2ID" || form.Get("code") != "123456" || len(form["phone"]) != 1 {
		t.Errorf("as a form: %v", form)
	}
}

// TestPhoneSpellings: libphonenumber itself (not the edge's normaliser)
// reads every spelling as the victim's number, so a send that reaches the
// origin in any of them is a text to the victim for an origin that
// normalises.
func TestAttackPhoneSpellings(t *testing.T) {
	t.Parallel()
	const victim = "+14155550123"
	for _, s := range phoneSpellings(victim) {
		var v string
		switch s.ct {
		case "application/json":
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(s.body, &raw); err != nil {
				t.Errorf("%s: %v", s.name, err)
				continue
			}
			if err := json.Unmarshal(raw["phone"], &v); err != nil {
				v = string(raw["phone"]) // a JSON number
			}
		default:
			f, err := url.ParseQuery(string(s.body))
			if err != nil {
				t.Errorf("%s: %v", s.name, err)
				continue
			}
			v = f.Get("phone")
		}
		n, err := phonenumbers.Parse(v, "US")
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", s.name, v, err)
			continue
		}
		if got := phonenumbers.Format(n, phonenumbers.E164); got != victim {
			t.Errorf("%s: %q reads as %s, want %s", s.name, v, got, victim)
		}
	}
}

func TestAttackRawRequestWire(t *testing.T) {
	t.Parallel()
	r := &rawRequest{method: "POST", target: "http://other/login", body: []byte(`{}`), tag: "t1"}
	r.add("Host", "login.example.com").add("X_HTTP_Method_Override", "POST").add("Host", "second")
	want := "POST http://other/login HTTP/1.1\r\nHost: login.example.com\r\nX_HTTP_Method_Override: POST\r\nHost: second\r\n" +
		attackTagHeader + ": t1\r\nContent-Length: 2\r\n\r\n{}"
	if got := string(r.wire()); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	g := &rawRequest{method: "GET", target: "/a"}
	if got := string(g.wire()); got != "GET /a HTTP/1.1\r\n\r\n" {
		t.Errorf("GET: got %q", got)
	}
}

func TestAttackHitsDelta(t *testing.T) {
	t.Parallel()
	before := otpHits{"/login": 3, "/x": 1}
	after := otpHits{"/login": 5, "/x": 1, "/y": 2}
	if n, err := hitsDelta(before, after, nil); n != 4 || err != nil {
		t.Errorf("all: got %d, %v; want 4", n, err)
	}
	if n, err := hitsDelta(before, after, func(p string) bool { return p == "/login" }); n != 2 || err != nil {
		t.Errorf("/login: got %d, %v; want 2", n, err)
	}
	if _, err := hitsDelta(after, before, nil); err == nil {
		t.Error("counts that went down: want an error")
	}
}

func TestAttacksUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "attacks", "-classes", "nope"}, `unknown attack class "nope"`},
		{[]string{"-scenario", "attacks", "-flood", "-1"}, "-flood must be in"},
		{[]string{"-scenario", "attacks", "-slowloris", "-1"}, "-slowloris must be in"},
		{[]string{"-scenario", "attacks", "-host", "a/b"}, "-host"},
		{[]string{"-scenario", "attacks", "-target", "http://10.0.0.1:8080"}, "not a loopback address"},
		{[]string{"-scenario", "attacks", "-policy", "testdata/nonexistent.hcl"}, "reading the policy"},
	}
	for _, tt := range tests {
		code, out, stderr := runTool(t, tt.args...)
		if code != exitError || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, exitError, tt.want)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", tt.args, out)
		}
	}
}

// TestAttackAccountSpellings: an identity provider comparing identifiers
// as RFC 8265 and case-insensitive stores do (NFKC, Unicode full case
// folding, white space trimmed; computed here with golang.org/x/text, not
// with the edge's normaliser) reads every login spelling as the victim,
// each spelling is a new string, and Gmail (dots and "+tag" ignored,
// googlemail.com the same) delivers every signup spelling to one inbox.
func TestAttackAccountSpellings(t *testing.T) {
	t.Parallel()
	idp := func(s string) string {
		s = norm.NFKC.String(cases.Fold().String(norm.NFKC.String(s)))
		return strings.TrimFunc(s, unicode.IsSpace)
	}
	const victim = accountVictimPrefix + "0a1b2c3d"
	seen := map[string]bool{}
	for _, s := range loginAccountSpellings(victim) {
		if got := idp(s.value); got != victim {
			t.Errorf("%s: %q reads as %q, want %q", s.name, s.value, got, victim)
		}
		if seen[s.value] {
			t.Errorf("%s: %q twice", s.name, s.value)
		}
		seen[s.value] = true
	}
	if s := loginAccountSpellings(victim); s[0].value != victim || len(s) < 15 {
		t.Errorf("first spelling %q, %d spellings; want the victim first and at least 15", s[0].value, len(s))
	}
	inbox := func(addr string) string {
		local, domain, ok := strings.Cut(idp(addr), "@")
		if !ok {
			return ""
		}
		if domain == "googlemail.com" {
			domain = "gmail.com"
		}
		if domain == "gmail.com" {
			local, _, _ = strings.Cut(local, "+")
			local = strings.ReplaceAll(local, ".", "")
		}
		return local + "@" + domain
	}
	const local = "jdoe0a1b2c3d"
	seen = map[string]bool{}
	for _, s := range gmailSpellings(local) {
		if got := inbox(s.value); got != local+"@gmail.com" {
			t.Errorf("%s: %q reaches %q, want %s@gmail.com", s.name, s.value, got, local)
		}
		if seen[s.value] {
			t.Errorf("%s: %q twice", s.name, s.value)
		}
		seen[s.value] = true
	}
	// The model keys each login spelling's canonical form on one account:
	// the bound comes from the one account key, never from one per
	// spelling.
	m := loadTestModel(t, attacksPolicyPath)
	client := netip.MustParseAddr("2001:db8:7::1")
	var keys []rules.Key
	for i := range 3 {
		v, err := m.decide(canonReq{method: "POST", path: "/login", host: attackHost, client: client, fields: loginFields(victim, i)})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.cons {
			if c.name == "login-failures-account-client" {
				keys = append(keys, c.key)
			}
		}
	}
	if len(keys) != 3 || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Errorf("login-failures-account-client keys of three guesses at one account: %x, want three equal", keys)
	}
}
