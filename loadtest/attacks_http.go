package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
)

// Attack classes on what the request is: path spellings, method
// overrides, host confusion, and visitor cookies.

// Requests per case.
const (
	spellingRequests = 8 // per path spelling, method override or host case: over the per-visitor burst
	cookielessLogins = 8
	forgedLogins     = 6
	loginsPerID      = 7
)

// loginSpelling is a way of writing /login that some origin routes to its
// login handler (docs/attacks.md gives each one's origins).
type loginSpelling struct {
	target string
	why    string
}

var loginSpellings = []loginSpelling{
	{"/login", "the route itself"},
	{"/LOGIN", "case: case-insensitive routers"},
	{"/Login", "case"},
	{"//login", "repeated slash"},
	{"/./login", "dot segment, RFC 3986 §5.2.4"},
	{"/attacks/../login", "dot-dot segment"},
	{"/%2e/login", "percent-encoded dot segment"},
	{"/%6Cogin", "percent-encoded unreserved character, RFC 3986 §6.2.2.2"},
	{"/%6cogin", "lower-case escape"},
	{"/login/", "trailing slash"},
	{"/login.", "trailing dot: Windows strips it"},
	{"/login..", "trailing dots"},
	{"/login%2e", "encoded trailing dot"},
	{"/%2Flogin", "%2F: origins that decode before routing"},
	{"/%2flogin", "%2f"},
	{"/%5Clogin", "%5C: IIS reads a backslash as a slash"},
	{"/login;jsessionid=attacks", ";params: servlet containers drop them"},
	{"/login;", "empty ;params"},
	{"/..;/login", "Tomcat's ..;"},
	{"/log%C4%B1n", "U+0131 dotless i: upper-cases to I"},
	{"/LOG%C4%B0N", "U+0130 dotted I: lower-cases to i"},
	{"/%EF%BD%8Cogin", "U+FF4C fullwidth l: IIS best fit"},
	{"/log\xc4\xb1n", "raw UTF-8 U+0131"},
}

// denySpellings are ways of writing paths the shipped policy blocks
// outright (deny-internal), each beside the path it stands for.
var denySpellings = []struct{ target, canonical string }{
	{"/.git/config", "/.git/config"},
	{"/.git./config", "/.git/config"},
	{"/.GIT/config", "/.git/config"},
	{"/%2egit/config", "/.git/config"},
	{"/.git%2Fconfig", "/.git/config"},
	{"/.git;x/config", "/.git/config"},
	{"/.env", "/.env"},
	{"/.env.", "/.env"},
	{"/.ENV", "/.env"},
	{"/internal/status", "/internal/status"},
	{"/internal./status", "/internal/status"},
	{"//Internal/status", "/internal/status"},
}

// denyRequests is how many times each deny spelling is sent.
const denyRequests = 3

func pathSpellingRequests(*attackRun) int64 {
	return int64(len(loginSpellings)*spellingRequests + len(denySpellings)*denyRequests)
}

// runPathSpelling: every spelling of /login that an origin routes to its
// login handler must be held by the login rules as /login is
// (docs/host-and-path.md): each case is a new client logging in at one
// spelling, on a new account each time (spraying, so that the rules the
// path must match, not an account's, are what holds it). And every
// spelling of a path the policy denies outright must be denied: none may
// reach the origin.
func runPathSpelling(a *attackRun) error {
	for _, s := range loginSpellings {
		client := a.v6Client()
		cs, err := a.castAround(client, netip.Addr{}, actLogin, actLogin)
		if err != nil {
			return err
		}
		if err := a.loginCase("path-spelling", s.target, spellingRequests, func(int) netip.Addr { return client }, a.sprayed, s.target, cs); err != nil {
			return err
		}
	}
	for _, s := range denySpellings {
		client := a.v6Client()
		err := a.simpleCase("path-spelling", s.target, denyRequests, func(int) (*rawRequest, canonReq) {
			r := a.request(fasthttp.MethodGet, s.target)
			a.clientHeader(r, client)
			return r, canonReq{method: fasthttp.MethodGet, path: s.canonical, host: a.p.host, client: a.m.counted(client)}
		}, noBystanders("none: a deny rule counts nothing, so these requests meet no other user's counters"))
		if err != nil {
			return err
		}
	}
	return nil
}

// overrideHeaders are the method-override headers origins honour; the
// demo origin honours these three spellings, and CGI, PHP, WSGI and Rack
// origins read their "_" (and PHP their ".") spellings as the same
// headers.
var overrideHeaders = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// overrideCases are the header spellings and values sent.
var overrideCases = []header{
	{"X-HTTP-Method-Override", "POST"},
	{"X-HTTP-Method", "POST"},
	{"X-Method-Override", "POST"},
	{"x-http-method-override", "POST"},
	{"X-HTTP-METHOD-OVERRIDE", "POST"},
	{"X_HTTP_Method_Override", "POST"},
	{"X_HTTP_METHOD_OVERRIDE", "POST"},
	{"x_http_method_override", "POST"},
	{"X_HTTP_Method", "POST"},
	{"X_Method_Override", "POST"},
	{"X.HTTP.Method.Override", "POST"},
	{"X-HTTP-Method-Override", "post"},
	{"X-HTTP-Method-Override", " Post "},
}

func methodOverrideRequests(*attackRun) int64 { return int64(len(overrideCases) * spellingRequests) }

// runMethodOverride: a GET that an override header turns into a POST at
// the origin is a POST to the login rules (docs/host-and-path.md §3). Each
// case is a
// new client sending GET /login with one spelling; the gain counts the
// requests that reached the origin as a POST: with method POST, or
// carrying any spelling of an override header naming POST. Each login
// names a new account, as in path-spelling.
func runMethodOverride(a *attackRun) error {
	for _, oc := range overrideCases {
		name := oc.name
		if oc.value != "POST" {
			name += "=" + strings.TrimSpace(oc.value)
		}
		client := a.v6Client()
		tc, cs, err := a.beginAround("method-override", name, client, netip.Addr{}, actLogin, actLogin)
		if err != nil {
			return err
		}
		c := a.conn(netip.Addr{})
		var reached, gain int64
		for i := range spellingRequests {
			r, f := a.loginRequest(fasthttp.MethodGet, "/login", a.sprayed(i), i)
			a.clientHeader(r, client)
			r.add(oc.name, oc.value)
			_, got, ok, err := tc.sendTagged(c, r, a.loginCanon(client, f))
			if err != nil {
				c.close()
				return err
			}
			if ok {
				reached++
				if originSeesPost(got) {
					gain++
				}
			}
		}
		c.close()
		if err := tc.checkReached(reached); err != nil {
			return err
		}
		if err := tc.play(cs); err != nil {
			return err
		}
		tc.finish(gain, "requests that reached the origin as a POST (method, or an override header in any spelling)")
	}
	return nil
}

// originSeesPost reports whether an origin that honours method overrides
// in any spelling reads req as a POST.
func originSeesPost(req originRequest) bool {
	if strings.EqualFold(req.Method, fasthttp.MethodPost) {
		return true
	}
	for _, h := range overrideHeaders {
		for _, tok := range strings.FieldsFunc(strings.ToUpper(req.header(h)), func(r rune) bool { return r < 'A' || r > 'Z' }) {
			if tok == fasthttp.MethodPost {
				return true
			}
		}
	}
	return false
}

// hostCase is one way of naming the protected host to the origin while
// showing the edge another.
type hostCase struct {
	name    string
	target  string   // the request-target; "" for /login
	hosts   []string // Host header lines
	headers []header // more headers
}

// otherHost is a host no rule names.
const otherHost = "attacks-other.invalid"

func (a *attackRun) hostCases() []hostCase {
	h := a.p.host
	return []hostCase{
		{name: "plain", hosts: []string{h}},
		{name: "absolute-form-other-host", target: "http://" + otherHost + "/login", hosts: []string{h}},
		{name: "absolute-form-protected-host", target: "http://" + h + "/login", hosts: []string{otherHost}},
		{name: "upper-case", hosts: []string{strings.ToUpper(h)}},
		{name: "trailing-dot", hosts: []string{h + "."}},
		{name: "port", hosts: []string{h + ":8080"}},
		{name: "two-host-headers", hosts: []string{otherHost, h}},
		{name: "two-host-headers-reversed", hosts: []string{h, otherHost}},
		{name: "x-forwarded-host", hosts: []string{otherHost}, headers: []header{{"X-Forwarded-Host", h}}},
		{name: "forwarded-host", hosts: []string{otherHost}, headers: []header{{"Forwarded", "host=" + h}}},
	}
}

func hostConfusionRequests(a *attackRun) int64 { return int64(len(a.hostCases()) * spellingRequests) }

// runHostConfusion: the host rules match is the host the origin receives
// (docs/host-and-path.md §1). It needs a login rule limited to -host (hosts =
// [...]): loadtest/testdata/attacks-hosts.hcl is the shipped policy with
// its login rules so limited. Each case is a new client logging in with
// the protected host where an origin can read it and another where the
// edge might look; the gain counts the requests that reached the origin
// naming the protected host (Host, in any case, with a port or a trailing
// dot, any of two Host lines, X-Forwarded-Host or Forwarded's host=).
// Each login names a new account: the account rules hold every host alike,
// and one account would be held by them whatever host the edge read.
func runHostConfusion(a *attackRun) error {
	client := a.v6Client()
	at := func(host string) canonReq {
		c := a.loginCanon(client, loginFields(a.account("probe"), 0))
		c.host = host
		return c
	}
	own, err := a.m.decide(at(a.p.host))
	if err != nil {
		return err
	}
	other, err := a.m.decide(at(otherHost))
	if err != nil {
		return err
	}
	switch {
	case len(own.cons) == 0 && !own.refused:
		a.skip("host-confusion", "", fmt.Sprintf("the policy %s limits no POST /login at %s", a.p.policy, a.p.host))
		return nil
	case len(other.cons) >= len(own.cons):
		a.skip("host-confusion", "", fmt.Sprintf("no login rule of %s is limited to %s (hosts); serve loadtest/testdata/attacks-hosts.hcl, the shipped policy with hosts on its login rules, and pass it as -policy",
			a.p.policy, a.p.host))
		return nil
	}
	for _, hc := range a.hostCases() {
		client := a.v6Client()
		tc, cs, err := a.beginAround("host-confusion", hc.name, client, netip.Addr{}, actLogin, actLogin)
		if err != nil {
			return err
		}
		c := a.conn(netip.Addr{})
		var reached, gain int64
		for i := range spellingRequests {
			target := hc.target
			if target == "" {
				target = "/login"
			}
			f := loginFields(a.sprayed(i), i)
			r := &rawRequest{method: fasthttp.MethodPost, target: target, body: jsonBody(f)}
			for _, h := range hc.hosts {
				r.add("Host", h)
			}
			r.headers = append(r.headers, hc.headers...)
			r.add("Content-Type", "application/json")
			a.clientHeader(r, client)
			_, got, ok, err := tc.sendTagged(c, r, a.loginCanon(client, f))
			if err != nil {
				c.close()
				return err
			}
			if ok {
				reached++
				if originSeesHost(got, a.p.host) {
					gain++
				}
			}
		}
		c.close()
		if err := tc.checkReached(reached); err != nil {
			return err
		}
		if err := tc.play(cs); err != nil {
			return err
		}
		tc.finish(gain, "requests that reached the origin naming "+a.p.host)
	}
	return nil
}

// originSeesHost reports whether an origin could route req to host: its
// Host header, or one of several, or X-Forwarded-Host, or Forwarded's
// host= names it, in any case, with a port, userinfo or a trailing dot.
func originSeesHost(req originRequest, host string) bool {
	for _, v := range []string{req.header("Host"), req.header("X-Forwarded-Host")} {
		for _, h := range strings.Split(v, ",") {
			if sameHost(h, host) {
				return true
			}
		}
	}
	for _, el := range strings.FieldsFunc(req.header("Forwarded"), func(r rune) bool { return r == ',' || r == ';' }) {
		k, v, ok := strings.Cut(strings.TrimSpace(el), "=")
		if ok && strings.EqualFold(k, "host") && sameHost(strings.Trim(v, `"`), host) {
			return true
		}
	}
	return false
}

// sameHost compares an authority with a host name as origins resolve it:
// case, a port, userinfo and a trailing dot ignored.
func sameHost(authority, host string) bool {
	h := strings.ToLower(strings.TrimSpace(authority))
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		h = h[i+1:]
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	return h != "" && h == strings.ToLower(host)
}

func cookieCyclingRequests(a *attackRun) int64 {
	mint := int64(10)
	if v := nat.ConfigOf(a.m.p); v != nil {
		mint = v.MintLimit
	}
	ids := mint + 5 + cookielessLogins
	return cookielessLogins + forgedLogins + (mint + 5) + ids*loginsPerID
}

// mintTarget is a path the shipped policy does not limit: the cookie
// cycler fetches visitor IDs there.
const mintTarget = "/trace/attacks-mint"

// runCookieCycling: a client that drops its visitor cookie, forges one,
// or collects many gains at most the visitor IDs the mint budget allows
// (mint_limit per mint_period, per IP) and, in logins, the IP's cookieless
// budget plus each ID's budget, all under the IP's ceiling (docs/policy.md,
// "The visitor characteristic";
// cgnat.go measures the same with a crowd). One client: logins without a
// cookie, then with forged ones, then fetches of new IDs from a path no
// rule limits, then logins with each ID it was given, each budget on an
// account of its own. The account rules hold such a client too: five
// failures per account (login-failures-account-client) on at most ten
// accounts (login-accounts-per-ip, which then bans the client), so it
// gains less than the visitor budgets' sum.
func runCookieCycling(a *attackRun) error {
	if a.noVisitor("cookie-cycling") {
		return nil
	}
	client := a.v6Client()
	// The attack spends the address's mint budget and its cookieless
	// bucket and trips login-accounts-per-ip's ban (issue 24, harms c and
	// d): the known browser behind it must still log in, and so must a
	// new one, which the policy promises a cookie of its own.
	tc, cs, err := a.beginAround("cookie-cycling", "logins", client, netip.Addr{}, actLogin, actLogin)
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	var ids []string
	seen := make(map[string]bool)
	var mintVerdicts []canonVerdict
	collect := func(ans rawAnswer) {
		if ans.cookie != "" && !seen[ans.cookie] {
			seen[ans.cookie] = true
			ids = append(ids, ans.cookie)
		}
	}
	login := func(i int, account, cookie string, valid bool) error {
		r, f := a.loginRequest(fasthttp.MethodPost, "/login", account, i)
		a.clientHeader(r, client)
		canon := a.loginCanon(client, f)
		if cookie != "" {
			r.add("Cookie", a.cookie+"="+cookie)
			if valid {
				canon.visitor = cookie
			}
		}
		v, err := a.m.decide(canon)
		if err != nil {
			return err
		}
		mintVerdicts = append(mintVerdicts, v)
		ans, err := tc.send(c, r, canon)
		if err != nil {
			return err
		}
		collect(ans)
		return nil
	}
	// Each visitor budget guesses at an account of its own, as an
	// attacker making the most of them does (login-failures-account-client
	// holds one account to 5 per client whatever the visitor).
	n := 0
	cookieless := a.account("victim")
	for range cookielessLogins {
		if err := login(n, cookieless, "", false); err != nil {
			return err
		}
		n++
	}
	for range forgedLogins {
		if err := login(n, cookieless, forgedCookie(), false); err != nil {
			return err
		}
		n++
	}
	fetched, err := tc.fetchIDs(c, client, int(nat.ConfigOf(a.m.p).MintLimit+5), &mintVerdicts)
	if err != nil {
		return err
	}
	for _, id := range fetched {
		collect(rawAnswer{cookie: id})
	}
	maxIDs := int(cookieCyclingRequests(a)/loginsPerID) + 1
	for k := 0; k < len(ids) && k < maxIDs; k++ {
		victim := a.account("victim")
		for range loginsPerID {
			if err := login(n, victim, ids[k], true); err != nil {
				return err
			}
			n++
		}
	}
	return tc.finishLogins(cs, "logins that reached the origin", mintVerdicts, len(ids), "cookie-cycling/visitor-ids")
}

// mintResult records and prints a mint-budget line: gain distinct visitor
// IDs the edge set on sent cookieless requests of one IP, against bound;
// its bystanders played with the case named by with.
func (a *attackRun) mintResult(name string, sent, gain, bound int64, op rules.Op, with string) {
	r := caseResult{
		name:  name,
		sent:  sent,
		gain:  gain,
		bound: caseBoundResult{bound, fmt.Sprintf("visitor mint budget: %s per IP, 1 IP", describeOp(op))},
		note:  "distinct visitor IDs the edge set on answers to one IP's cookieless requests",
	}
	r.coll.lines = []string{"played with " + with}
	a.results = append(a.results, r)
	writeAttackLine(a.out, &r)
	fmt.Fprintf(a.out, "    %d cookieless requests; gain: %s\n    bound: %s\n", r.sent, r.note, r.bound.why)
	writeCollateral(a.out, &r)
}

// forgedCookie returns a visitor cookie the edge never signed.
func forgedCookie() string {
	b := make([]byte, 40)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
