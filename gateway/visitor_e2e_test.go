package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/nat"
)

// The visitor-ID tests of issue 4, through the real server on loopback with
// visitors.hcl: mint_limit 2 per minute; api-per-visitor 3 a minute (burst
// 3) per visitor with an IP ceiling of 12; login-per-visitor 5 a minute,
// sensitive.

const visitorsPolicy = "testdata/fixtures/policies/visitors.hcl"

var (
	secretA = "visitor-secret-A-0123456789abcdef"
	secretB = "visitor-secret-B-0123456789abcdef"
	retired = "visitor-secret-R-0123456789abcdef"
)

func startVisitorNode(t *testing.T) (*node, *fakeClock) {
	t.Helper()
	t.Setenv("EDGE_VISITOR_SECRETS", secretA+","+secretB)
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	return startNode(t, loadPolicy(t, visitorsPolicy), nodeOptions{clock: clk}), clk
}

func signer(t *testing.T, secrets ...string) *nat.Signer {
	t.Helper()
	var ss [][]byte
	for _, s := range secrets {
		ss = append(ss, []byte(s))
	}
	sg, err := nat.NewSigner(nat.Options{Secrets: ss, MaxAge: 720 * time.Hour, Cookie: "__edge_vid"})
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

func cookieOf(r reply) string {
	for _, sc := range r.header.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(sc, "__edge_vid="); ok {
			return v[:strings.IndexByte(v+";", ';')]
		}
	}
	return ""
}

func withCookie(v string) []string {
	if v == "" {
		return nil
	}
	return []string{"Cookie", "__edge_vid=" + v}
}

func TestVisitorCookieIsMintedAndGivesItsOwnBudget(t *testing.T) {
	n, _ := startVisitorNode(t)
	r := do(t, "GET", "http://"+n.addr+"/api/x", "")
	if r.status != 200 {
		t.Fatalf("got %d", r.status)
	}
	sc := r.header.Get("Set-Cookie")
	vid := cookieOf(r)
	if vid == "" {
		t.Fatalf("no visitor cookie in %q", sc)
	}
	for _, attr := range []string{"Path=/", "Max-Age=2592000", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(sc, attr) {
			t.Errorf("Set-Cookie %q lacks %s", sc, attr)
		}
	}
	if strings.Contains(sc, "Secure") {
		t.Errorf("Set-Cookie %q is Secure although visitors.hcl sets secure = false", sc)
	}
	// The origin hears the visitor's keyed hash, never the cookie.
	xv := n.last(t).Headers["X-Edge-Visitor"]
	if xv == "" || strings.Contains(xv, vid) || strings.Contains(vid, xv) {
		t.Errorf("origin X-Edge-Visitor %q (cookie %q)", xv, vid)
	}
	// The cookieless request spent one of the IP's cookieless bucket; the
	// new visitor has its own three.
	var got []int
	for range 4 {
		r := do(t, "GET", "http://"+n.addr+"/api/x", "", withCookie(vid)...)
		got = append(got, r.status)
		if c := cookieOf(r); c != "" {
			t.Errorf("a valid visitor got a new cookie %q", c)
		}
		if h := n.last(t).Headers["X-Edge-Visitor"]; h != xv {
			t.Errorf("X-Edge-Visitor %q, want %q", h, xv)
		}
	}
	if want := []int{200, 200, 200, 429}; !equalInts(got, want) {
		t.Errorf("visitor: got %v, want %v", got, want)
	}
}

func TestInvalidVisitorCookiesCountAsNone(t *testing.T) {
	n, clk := startVisitorNode(t)
	now := clk.Now()
	tampered, _ := signer(t, secretA).Mint(nil, now)
	tampered[10] ^= 1
	if tampered[10] == '-' || tampered[10] == '_' {
		tampered[10] = 'A'
	}
	fromRetired, _ := signer(t, retired).Mint(nil, now)
	expired, _ := signer(t, secretA).Mint(nil, now.Add(-721*time.Hour))
	// Three bad cookies and no cookie share the IP's cookieless bucket of 3.
	var got []int
	for _, c := range []string{string(tampered), string(fromRetired), string(expired), ""} {
		got = append(got, do(t, "GET", "http://"+n.addr+"/api/x", "", withCookie(c)...).status)
	}
	if want := []int{200, 200, 200, 429}; !equalInts(got, want) {
		t.Errorf("bad cookies: got %v, want %v (one cookieless bucket)", got, want)
	}
	// A cookie signed with the second secret of the list is valid: its own
	// bucket.
	second, _ := signer(t, secretB).Mint(nil, now)
	if r := do(t, "GET", "http://"+n.addr+"/api/x", "", withCookie(string(second))...); r.status != 200 || cookieOf(r) != "" {
		t.Errorf("second-secret cookie: got %d, cookie %q; want 200 and no new cookie", r.status, cookieOf(r))
	}
}

// TestCookieCyclingIsBounded: a client that drops its cookie on every
// request gets exactly mint_limit (2) fresh IDs per period, and passes
// exactly what the cookieless bucket (3) allows.
func TestCookieCyclingIsBounded(t *testing.T) {
	n, clk := startVisitorNode(t)
	mints, passes := 0, 0
	for range 30 {
		r := do(t, "GET", "http://"+n.addr+"/api/x", "")
		if r.status == 200 {
			passes++
		}
		if cookieOf(r) != "" {
			mints++
		}
	}
	if mints != 2 || passes != 3 {
		t.Errorf("cookie cycler got %d cookies and %d passes, want 2 and 3", mints, passes)
	}
	// The next period brings the budgets back: 2 more cookies at most.
	clk.Advance(time.Minute)
	mints = 0
	for range 10 {
		if cookieOf(do(t, "GET", "http://"+n.addr+"/api/x", "")) != "" {
			mints++
		}
	}
	if mints != 2 {
		t.Errorf("next period: %d cookies, want 2", mints)
	}
}

// TestStockpiledVisitorIDsAreHeldToTheCeiling: ten valid IDs of three
// requests each would be 30; the IP's ceiling holds them to exactly 12.
func TestStockpiledVisitorIDsAreHeldToTheCeiling(t *testing.T) {
	n, clk := startVisitorNode(t)
	sg := signer(t, secretA)
	passes := 0
	for range 10 {
		c, _ := sg.Mint(nil, clk.Now())
		for range 3 {
			if do(t, "GET", "http://"+n.addr+"/api/x", "", withCookie(string(c))...).status == 200 {
				passes++
			}
		}
	}
	if passes != 12 {
		t.Errorf("a stockpile of 10 visitors passed %d, want the ceiling 12", passes)
	}
	// Another IP is not affected.
	c, _ := sg.Mint(nil, clk.Now())
	if r := do(t, "GET", "http://"+n.addr+"/api/x", "", append(withCookie(string(c)), "X-Forwarded-For", "198.51.100.5")...); r.status != 200 {
		t.Errorf("another IP: got %d", r.status)
	}
}

func TestBare429NeverSetsAVisitorCookie(t *testing.T) {
	n, _ := startVisitorNode(t)
	for i := range 12 {
		resp := raw(t, n.addr, "POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		if rawStatus(t, resp) == 429 && strings.Contains(strings.ToLower(resp), "set-cookie") {
			t.Fatalf("request %d: a bare 429 sets a cookie:\n%s", i, resp)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
