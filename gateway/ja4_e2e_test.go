package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edge-gateway/edge/botscore"
	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testcert"
	"github.com/edge-gateway/edge/ja4"
	nodecfg "github.com/edge-gateway/edge/node"
)

// The JA4 tests (docs/deploying.md, "JA4 fingerprints") run the real
// server on bots.hcl (its botscore block included) with ja4_header and a
// rule keyed on ja4, over the real TLS listener (gateway/tls.go) or plain
// HTTP. The fingerprint the edge used is what the origin receives in
// X-Edge-JA4; the one it should have used is computed independently of
// the edge, from the bytes the client sent as the client side saw them: a
// recording dialer for Go's crypto/tls, a loopback relay for curl and
// Chromium. Package ja4's own tests check the computation against FoxIO's
// published vectors.

// ja4Rule counts GET /trace/limited per fingerprint. It is sensitive, so its
// missing_identity is reject: a request without a fingerprint must still
// skip it.
const ja4Rule = `
rule "limited-per-ja4" {
  methods   = ["GET"]
  paths     = ["/trace/limited"]
  key       = ["ja4"]
  algorithm = "fixed_window"
  limit     = 2
  period    = "1h"
  sensitive = true
}
`

// Fingerprints measured here (botscore/ja4.go's table).
const (
	chromeCiphers = "8daaf6152771"
	goCiphers     = "f57a46bbacb6"
)

type ja4Node struct {
	addr string
	ca   *testcert.CA
	o    *node // for last(): the origin's address
}

// startJA4Node serves bots.hcl with ja4_header = "X-JA4" and ja4Rule, over
// TLS unless plain; replace rewrites the policy's source first (pairs).
func startJA4Node(t *testing.T, plain bool, replace ...string) *ja4Node {
	t.Helper()
	path := filepath.Join(repoRoot(t), botsFixture)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(src), "edge {\n", "edge {\n  ja4_header = \"X-JA4\"\n", 1) + ja4Rule
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("the policy does not contain %q", replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	n := &ja4Node{ca: testcert.NewCA(t)}
	if !plain {
		dir := t.TempDir()
		n.ca.Issue(t, "edge.example").Write(t, filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key"))
		s = tlsPolicySrc(t, s, dir)
	}
	p, diags := builtin.Load(path, []byte(s))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if nodecfg.Of(p).JA4Header != "X-Ja4" || (nodecfg.Of(p).TLS == nil) != plain {
		t.Fatalf("policy: ja4_header %q, tls %v", nodecfg.Of(p).JA4Header, nodecfg.Of(p).TLS != nil)
	}
	// startNode serves on a plain listener; Serve wraps it in TLS itself
	// when the policy has a tls block (wrapTLS), as cmd/edge runs it.
	n.o = startNode(t, p, nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}})
	n.addr = n.o.addr
	if n.o.srv.ServesTLS() == plain {
		t.Fatalf("ServesTLS() = %v", !plain)
	}
	return n
}

// header is a header of the request the origin last received, by name in
// any case ("" when absent).
func (n *ja4Node) header(t *testing.T, name string) string {
	t.Helper()
	for k, v := range n.o.last(t).Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// recordingConn keeps the first bytes a client writes (its ClientHello).
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	out []byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.out) < ja4.MaxRecord {
		c.out = append(c.out, p[:min(len(p), ja4.MaxRecord-len(c.out))]...)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *recordingConn) sent() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.out...)
}

// goClient is Go's crypto/tls client (net/http, HTTP/1.1: ALPN
// "http/1.1"), a new connection per request, each recorded.
type goClient struct {
	c     *http.Client
	mu    sync.Mutex
	conns []*recordingConn
}

func newGoClient(n *ja4Node) *goClient {
	g := &goClient{}
	g.c = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: n.ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			rc := &recordingConn{Conn: c}
			g.mu.Lock()
			g.conns = append(g.conns, rc)
			g.mu.Unlock()
			return rc, nil
		},
	}}
	return g
}

// get sends GET url with headers (pairs) and returns the status.
func (g *goClient) get(t *testing.T, url string, header ...string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := g.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// lastJA4 is the JA4 of the last connection's ClientHello, computed from
// what the client wrote.
func (g *goClient) lastJA4(t *testing.T) string {
	t.Helper()
	g.mu.Lock()
	c := g.conns[len(g.conns)-1]
	g.mu.Unlock()
	fp, err := ja4.Records(nil, c.sent())
	if err != nil {
		t.Fatalf("the client's own ClientHello: %v", err)
	}
	return string(fp)
}

// helloRelay is a loopback TCP relay to the edge that records the first
// bytes of each connection a client opens through it.
type helloRelay struct {
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	hellos []*recordingConn
	conns  []net.Conn
}

func startRelay(t *testing.T, target string) *helloRelay {
	t.Helper()
	r := &helloRelay{ln: listen(t)}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			rec := &recordingConn{Conn: up}
			r.mu.Lock()
			r.hellos = append(r.hellos, rec)
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			r.wg.Add(2)
			go func() { defer r.wg.Done(); io.Copy(rec, c); up.(*net.TCPConn).CloseWrite() }()
			go func() { defer r.wg.Done(); io.Copy(c, up); c.(*net.TCPConn).CloseWrite() }()
		}
	}()
	t.Cleanup(func() {
		r.ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *helloRelay) addr() string { return r.ln.Addr().String() }

// fingerprints are the JA4s of the ClientHellos clients sent through r.
func (r *helloRelay) fingerprints(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.hellos {
		if fp, err := ja4.Records(nil, c.sent()); err == nil {
			out = append(out, string(fp))
		}
	}
	return out
}

// checkShape checks a fingerprint's stable structure: TLS over TCP, TLS
// 1.3, its SNI mark, two-digit counts and the ALPN mark.
func checkShape(t *testing.T, fp, sni, alpn string) {
	t.Helper()
	if !ja4.Valid([]byte(fp)) || !strings.HasPrefix(fp, "t13"+sni) || fp[8:10] != alpn {
		t.Errorf("fingerprint %q, want t13%s…%s_…", fp, sni, alpn)
	}
}

// TestJA4ThroughTLSListener: the JA4 the edge computes over its real TLS
// listener equals the one computed from the bytes the client sent, for
// Go's crypto/tls client, curl and Chromium; Chromium with a Chrome User-Agent
// gets no ja4_mismatch, Go's client claiming Chrome does.
func TestJA4ThroughTLSListener(t *testing.T) {
	n := startJA4Node(t, false)

	t.Run("go crypto/tls", func(t *testing.T) {
		g := newGoClient(n)
		if st := g.get(t, "https://"+n.addr+"/trace/ja4", "User-Agent", desktopChrome, "Accept", "text/html", "Accept-Language", "en", "Accept-Encoding", "gzip"); st != 200 {
			t.Fatalf("status %d", st)
		}
		want := g.lastJA4(t)
		if got := n.header(t, "X-Edge-JA4"); got != want {
			t.Errorf("the edge's JA4 %q, the client's ClientHello gives %q", got, want)
		}
		// No SNI (the client dials an IP), ALPN http/1.1; the cipher hash
		// of botscore/ja4.go's table (Go's default list: it changes only
		// with Go's release, and then the table must follow).
		checkShape(t, want, "i", "h1")
		if want[11:23] != goCiphers {
			t.Errorf("Go's cipher hash is %s, botscore/ja4.go's table has %s: update the table", want[11:23], goCiphers)
		}
		if r := n.header(t, "X-Edge-Bot-Reasons"); !strings.Contains(r, "ja4_mismatch") {
			t.Errorf("Go's client claiming Chrome: reasons %q, want ja4_mismatch", r)
		}
	})

	t.Run("curl", func(t *testing.T) {
		curl := needBinary(t, "curl")
		relay := startRelay(t, n.addr)
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, n.ca.PEM, 0o644); err != nil {
			t.Fatal(err)
		}
		// A hang guard, not a measure.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, port, _ := net.SplitHostPort(relay.addr())
		out, err := exec.CommandContext(ctx, curl, "-sS", "--cacert", ca, "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
			"--resolve", "localhost:"+port+":127.0.0.1", "https://localhost:"+port+"/trace/ja4").CombinedOutput()
		if err != nil || string(out) != "200 1.1" {
			t.Fatalf("curl: %v: %q, want 200 over HTTP/1.1", err, out)
		}
		fps := relay.fingerprints(t)
		if len(fps) != 1 {
			t.Fatalf("curl sent %d ClientHellos, want 1", len(fps))
		}
		if got := n.header(t, "X-Edge-JA4"); got != fps[0] {
			t.Errorf("the edge's JA4 %q, curl's ClientHello gives %q", got, fps[0])
		}
		// SNI (a name), and curl's first ALPN offer: h2 when it is built
		// with HTTP/2 (the edge picks http/1.1 from its list).
		alpn := "h1"
		if v, _ := exec.Command(curl, "-V").Output(); bytes.Contains(v, []byte("HTTP2")) {
			alpn = "h2"
		}
		checkShape(t, fps[0], "d", alpn)
	})

	t.Run("chromium", func(t *testing.T) {
		chromium := chromiumPath(t)
		relay := startRelay(t, n.addr)
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second) // a hang guard
		defer cancel()
		var out lockedBuffer
		opts := append(chromiumOptions(chromium, &out), chromedp.UserAgent(desktopChrome), chromedp.Flag("ignore-certificate-errors", true))
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
		defer cancelAlloc()
		browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
		defer cancelBrowser()
		_, port, _ := net.SplitHostPort(relay.addr())
		if _, err := chromedp.RunResponse(browserCtx, chromedp.Navigate("https://localhost:"+port+"/trace/page")); err != nil {
			t.Fatalf("navigating: %v\n%s", err, out.String())
		}
		got := n.header(t, "X-Edge-JA4")
		fps := relay.fingerprints(t)
		found := false
		for _, fp := range fps {
			found = found || fp == got
		}
		if !found {
			t.Fatalf("the edge's JA4 %q is none of Chromium's ClientHellos' %q", got, fps)
		}
		// Chrome's cipher list, TLS 1.3, SNI, h2 offered first.
		checkShape(t, got, "d", "h2")
		if got[11:23] != chromeCiphers || !botscore.JA4Fits(botscore.BrowserChrome, []byte(got)) {
			t.Errorf("Chromium's JA4 %q: want cipher hash %s, fitting Chrome", got, chromeCiphers)
		}
		if r := n.header(t, "X-Edge-Bot-Reasons"); strings.Contains(r, "ja4_mismatch") {
			t.Errorf("Chromium with a Chrome User-Agent: reasons %q, want no ja4_mismatch", r)
		}
		t.Logf("Chromium: %s (reasons %q)", got, n.header(t, "X-Edge-Bot-Reasons"))
	})
}

// TestJA4RuleCountsPerFingerprint: a rule keyed on ja4 gives each
// fingerprint its own budget over TLS (Go's client and curl), skips on
// plain HTTP although sensitive, counts a trusted proxy's ja4_header
// (which comes before the connection's), rejects one that is not a JA4,
// and ignores and strips an untrusted peer's.
func TestJA4RuleCountsPerFingerprint(t *testing.T) {
	t.Run("tls", func(t *testing.T) {
		n := startJA4Node(t, false)
		g := newGoClient(n)
		for i, want := range []int{200, 200, 429} {
			if st := g.get(t, "https://"+n.addr+"/trace/limited"); st != want {
				t.Fatalf("Go request %d: status %d, want %d", i+1, st, want)
			}
		}
		curl := needBinary(t, "curl")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
		defer cancel()
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, n.ca.PEM, 0o644); err != nil {
			t.Fatal(err)
		}
		url := "https://" + n.addr + "/trace/limited"
		// One connection, three requests.
		out, err := exec.CommandContext(ctx, curl, "-sS", "--cacert", ca, "-w", "%{http_code} ",
			"-o", "/dev/null", url, "-o", "/dev/null", url, "-o", "/dev/null", url).CombinedOutput()
		if err != nil || string(out) != "200 200 429 " {
			t.Errorf("curl after Go's budget ran out: %v: %q, want 200 200 429 (a budget of its own)", err, out)
		}
		// A trusted proxy's header comes before the connection's JA4: a
		// fingerprint of its own, with a fresh budget.
		if st := g.get(t, "https://"+n.addr+"/trace/limited", "X-JA4", "t13d1516h2_8daaf6152771_e5627efa2ab1"); st != 200 {
			t.Errorf("Go's connection with a trusted X-JA4: status %d, want 200", st)
		}
		if got := n.header(t, "X-Edge-JA4"); got != "t13d1516h2_8daaf6152771_e5627efa2ab1" {
			t.Errorf("X-Edge-JA4 %q, want the trusted proxy's", got)
		}
	})

	t.Run("plain HTTP skips", func(t *testing.T) {
		n := startJA4Node(t, true)
		for i := range 5 {
			if r := do(t, "GET", "http://"+n.addr+"/trace/limited", ""); r.status != 200 {
				t.Fatalf("request %d without a fingerprint: status %d, want 200 (the rule skips)", i+1, r.status)
			}
		}
		if got := n.header(t, "X-Edge-JA4"); got != "" {
			t.Errorf("X-Edge-JA4 %q without a fingerprint", got)
		}
	})

	t.Run("trusted header", func(t *testing.T) {
		n := startJA4Node(t, true)
		const a, b = "t13d1516h2_8daaf6152771_e5627efa2ab1", "t13d1715h2_5b57614c22b0_3d5424432f57"
		for i, want := range []int{200, 200, 429} {
			if r := do(t, "GET", "http://"+n.addr+"/trace/limited", "", "x-ja4", " "+a); r.status != want {
				t.Fatalf("request %d with X-JA4 %s: status %d, want %d", i+1, a, r.status, want)
			}
		}
		if r := do(t, "GET", "http://"+n.addr+"/trace/limited", "", "X-JA4", b); r.status != 200 {
			t.Errorf("another fingerprint: status %d, want 200", r.status)
		}
		if got := n.header(t, "X-Edge-JA4"); got != b {
			t.Errorf("X-Edge-JA4 %q, want %q", got, b)
		}
		for _, bad := range [][]string{{"X-JA4", "not-a-ja4"}, {"X-JA4", strings.Repeat("t", 100)}, {"X-JA4", a, "X-JA4", b}} {
			if r := do(t, "GET", "http://"+n.addr+"/trace/limited", "", bad...); r.status != 400 {
				t.Errorf("X-JA4 %q: status %d, want 400 (invalid_identity)", bad[1:], r.status)
			}
		}
	})

	t.Run("untrusted header", func(t *testing.T) {
		n := startJA4Node(t, true, `trusted_proxies = ["127.0.0.1/32", "::1/128"]`, `trusted_proxies = ["10.0.0.0/8"]`)
		for i := range 4 {
			if r := do(t, "GET", "http://"+n.addr+"/trace/limited", "", "X-JA4", "t13d1516h2_8daaf6152771_e5627efa2ab1"); r.status != 200 {
				t.Fatalf("request %d: status %d, want 200 (an untrusted X-JA4 is ignored)", i+1, r.status)
			}
		}
		if got, edge := n.header(t, "X-JA4"), n.header(t, "X-Edge-JA4"); got != "" || edge != "" {
			t.Errorf("the origin got X-JA4 %q, X-Edge-JA4 %q from an untrusted peer, want neither", got, edge)
		}
	})
}
