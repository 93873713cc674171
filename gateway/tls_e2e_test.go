package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/internal/testcert"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules/memstore"
)

// tlsNode is an edge node serving TLS on loopback (gateway.New and Serve
// on a 127.0.0.1:0 listener, as cmd/edge runs them), with its demo origin.
type tlsNode struct {
	srv         *Server
	addr, admin string
	ca          *testcert.CA
	dir         string // the certificate files' directory
	oaddr       string // the demo origin's address
	logs        *syncBuffer
	stop        func() // stops the node and waits for every server to return
}

// tlsPolicySrc is src with a tls block for the files in dir added to its
// edge block.
func tlsPolicySrc(t testing.TB, src, dir string) string {
	t.Helper()
	if strings.Count(src, "edge {\n") != 1 {
		t.Fatal("the policy has no single edge block")
	}
	return strings.Replace(src, "edge {\n", fmt.Sprintf("edge {\n  tls {\n    cert_file = %q\n    key_file  = %q\n  }\n", filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")), 1)
}

// startTLSNode serves the repo policy rel over TLS with a certificate
// named cn, handshakes bounded by hsTimeout (0: the default), logging at
// info into the node's logs. plain serves the same policy without TLS.
func startTLSNode(t testing.TB, rel, cn string, hsTimeout time.Duration, plain bool) *tlsNode {
	t.Helper()
	n := &tlsNode{ca: testcert.NewCA(t), dir: t.TempDir(), logs: &syncBuffer{}}
	n.ca.Issue(t, cn).Write(t, filepath.Join(n.dir, "edge.crt"), filepath.Join(n.dir, "edge.key"))
	path := filepath.Join(repoRoot(t), rel)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	if !plain {
		s = tlsPolicySrc(t, s, n.dir)
	}
	p, diags := builtin.Load(path, []byte(s))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if !plain && nodecfg.Of(p).TLS == nil {
		t.Fatal("the policy has no TLS")
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ms, err := memstore.New(memstore.Options{MaxKeys: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	n.stop = func() { once.Do(func() { cancel(); wg.Wait(); ms.Close() }) }
	t.Cleanup(n.stop)
	origin := demo.New()
	oln := listen(t)
	n.oaddr = oln.Addr().String()
	wg.Add(1)
	go func() { defer wg.Done(); _ = origin.Serve(ctx, oln) }()
	n.srv, err = New(Options{
		Policy: p, Store: ms, Upstream: "http://" + oln.Addr().String(), Registry: prometheus.NewRegistry(), Extensions: builtin.Extensions(),
		Clock:  &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		Logger: slog.New(slog.NewJSONHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.srv.listenerTLS.timeout = hsTimeout
	ln, aln := listen(t), listen(t)
	n.addr, n.admin = ln.Addr().String(), aln.Addr().String()
	wg.Add(2)
	go func() { defer wg.Done(); _ = n.srv.Serve(ctx, ln) }()
	go func() { defer wg.Done(); _ = n.srv.ServeAdmin(ctx, aln) }()
	return n
}

// clientConfig trusts the node's CA only.
func (n *tlsNode) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: n.ca.Pool(), ServerName: "127.0.0.1"}
}

// rawTLS is raw over a new TLS connection made with Go's crypto/tls.
func (n *tlsNode) rawTLS(t testing.TB, request string) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", n.addr, n.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	return rawOn(t, c, request)
}

func loginRequest(client, username, password string) string {
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, password)
	return "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: " + client +
		"\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\nConnection: close\r\n\r\n" + body
}

// needBinary skips without the program, or fails under
// EDGE_REQUIRE_STACKS=1 (CI installs it: .ci/run).
func needBinary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("EDGE_REQUIRE_STACKS") == "1" {
			t.Fatalf("%s is not installed (EDGE_REQUIRE_STACKS=1)", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

// TestTLSLoginFloodAsOnPlainHTTP: on login.hcl, a login flood over TLS is
// refused exactly as on plain HTTP: the same statuses, and the same bytes
// (the Date line aside), the bare 429 of the sensitive route included,
// with Go's crypto/tls client; and curl --cacert sees the same statuses
// over HTTP/1.1.
func TestTLSLoginFloodAsOnPlainHTTP(t *testing.T) {
	plain := startTLSNode(t, loginFixture, "edge.example", 0, true)
	secure := startTLSNode(t, loginFixture, "edge.example", 0, false)
	if plain.srv.ServesTLS() || !secure.srv.ServesTLS() {
		t.Fatalf("ServesTLS: plain %v, tls %v", plain.srv.ServesTLS(), secure.srv.ServesTLS())
	}
	var statuses []int
	for i := range 7 {
		req := loginRequest("203.0.113.7", "alice@example.com", "wrong")
		overPlain := dateLine.ReplaceAllString(raw(t, plain.addr, req), "")
		overTLS := dateLine.ReplaceAllString(secure.rawTLS(t, req), "")
		if overPlain != overTLS {
			t.Errorf("attempt %d differs:\nplain HTTP:\n%q\nTLS:\n%q", i+1, overPlain, overTLS)
		}
		statuses = append(statuses, rawStatus(t, overTLS))
		if i == 6 {
			for _, leak := range []string{"RateLimit", "Retry-After", "login-", "account"} {
				if strings.Contains(overTLS, leak) {
					t.Errorf("the bare 429 over TLS mentions %q:\n%s", leak, overTLS)
				}
			}
		}
	}
	if want := "[401 401 401 401 401 429 429]"; fmt.Sprint(statuses) != want {
		t.Errorf("statuses over TLS %v, want %s", statuses, want)
	}

	curl := needBinary(t, "curl")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, secure.ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	statuses = statuses[:0]
	for range 7 {
		out, err := exec.Command(curl, "-sS", "--cacert", caFile, "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
			"-H", "X-Forwarded-For: 198.51.100.9", "-H", "Content-Type: application/json",
			"--data", `{"username":"bob@example.com","password":"wrong"}`, "https://127.0.0.1:"+port(secure.addr)+"/login").CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		code, version, _ := strings.Cut(string(out), " ")
		if version != "1.1" {
			t.Errorf("curl spoke HTTP %q, want 1.1 (the listener offers http/1.1 only)", version)
		}
		var st int
		fmt.Sscan(code, &st)
		statuses = append(statuses, st)
	}
	if want := "[401 401 401 401 401 429 429]"; fmt.Sprint(statuses) != want {
		t.Errorf("statuses curl saw %v, want %s", statuses, want)
	}
	// curl refuses the node's certificate without the CA: a real chain.
	if out, err := exec.Command(curl, "-sS", "-o", "/dev/null", "https://127.0.0.1:"+port(secure.addr)+"/").CombinedOutput(); err == nil {
		t.Errorf("curl without --cacert accepted the test CA's certificate: %s", out)
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// TestTLSVersionsAndALPN: TLS 1.2 and 1.3 are served, HTTP/1.1 is what
// ALPN settles on; a TLS 1.1-only client, and one that offers only h2,
// are refused at the handshake and counted.
func TestTLSVersionsAndALPN(t *testing.T) {
	n := startTLSNode(t, loginFixture, "edge.example", 0, false)
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cfg := n.clientConfig()
		cfg.MinVersion, cfg.MaxVersion = v, v
		cfg.NextProtos = []string{"h2", "http/1.1"}
		c, err := tls.Dial("tcp", n.addr, cfg)
		if err != nil {
			t.Fatalf("%s: %v", tls.VersionName(v), err)
		}
		st := c.ConnectionState()
		if st.Version != v || st.NegotiatedProtocol != "http/1.1" {
			t.Errorf("%s: version %s, ALPN %q, want http/1.1", tls.VersionName(v), tls.VersionName(st.Version), st.NegotiatedProtocol)
		}
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", tls.VersionName(v), err)
		}
		resp.Body.Close()
		c.Close()
	}
	old := n.clientConfig()
	old.MinVersion, old.MaxVersion = tls.VersionTLS11, tls.VersionTLS11
	if c, err := tls.Dial("tcp", n.addr, old); err == nil {
		c.Close()
		t.Error("a TLS 1.1 client was served")
	} else if !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("the TLS 1.1 client's error: %v, want a protocol version alert", err)
	}
	waitFor(t, func() bool { return testutil.ToFloat64(n.srv.listenerTLS.errs[hsVersion]) == 1 }, 10*time.Second, "the version refusal to be counted")
	h2 := n.clientConfig()
	h2.NextProtos = []string{"h2"}
	if c, err := tls.Dial("tcp", n.addr, h2); err == nil {
		c.Close()
		t.Error("an h2-only client was served")
	}
	waitFor(t, func() bool { return testutil.ToFloat64(n.srv.listenerTLS.errs[hsOther]) == 1 }, 10*time.Second, "the ALPN refusal to be counted")
}

// sslv3Hello is an SSLv3 ClientHello record: no supported_versions
// extension, client_version 3.0, one cipher suite
// (TLS_RSA_WITH_3DES_EDE_CBC_SHA), the null compression.
func sslv3Hello() []byte {
	body := []byte{0x03, 0x00} // client_version
	body = append(body, make([]byte, 32)...)
	body = append(body, 0x00)                   // session_id
	body = append(body, 0x00, 0x02, 0x00, 0x0a) // cipher_suites
	body = append(body, 0x01, 0x00)             // compression_methods
	hs := append([]byte{0x01, 0x00, byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{0x16, 0x03, 0x00, byte(len(hs) >> 8), byte(len(hs))}, hs...)
}

// TestScannerHandshakes: what scanners send to a TLS port (SSLv3, TLS 1.1,
// plain HTTP, garbage, a bare TCP connect, a half ClientHello, a silent
// connection) each costs one connection and one count under its reason,
// no log line at info, and no goroutine once the node has stopped
// (goleak); the node serves a real client throughout.
func TestScannerHandshakes(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	n := startTLSNode(t, loginFixture, "edge.example", 0, false)
	// The silent connection's node: its handshakes time out sooner than
	// the default 10s (only the silent connection meets it, so no slow
	// machine can turn another probe's reason into a timeout).
	quick := startTLSNode(t, loginFixture, "edge.example", 500*time.Millisecond, false)
	count := func(r int) float64 { return testutil.ToFloat64(n.srv.listenerTLS.errs[r]) }
	// probe sends b on a fresh connection (closing its write side when
	// half is set) and returns what the node answered before closing it.
	probe := func(b []byte, half bool) string {
		t.Helper()
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if half {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		out, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the node kept the connection open (sent %q)", b)
		}
		return string(out)
	}
	want := [numHSReasons]float64{}
	check := func(what string) {
		t.Helper()
		waitFor(t, func() bool {
			for r := range numHSReasons {
				if count(r) != want[r] {
					return false
				}
			}
			return true
		}, 10*time.Second, what+" counted")
	}

	probe(sslv3Hello(), false) // the node answers a protocol_version alert and closes
	want[hsVersion]++
	check("an SSLv3 ClientHello")

	old := n.clientConfig()
	old.MinVersion, old.MaxVersion = tls.VersionTLS11, tls.VersionTLS11
	if c, err := tls.Dial("tcp", n.addr, old); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 client was served")
	}
	want[hsVersion]++
	check("a TLS 1.1 client")

	if out := probe([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false); !strings.HasPrefix(out, "HTTP/1.0 400 Bad Request\r\n") || !strings.Contains(out, "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the TLS port: got %q", out)
	}
	want[hsNotTLS]++
	check("plain HTTP")

	probe([]byte("\xff\xfe\x00\x01garbage\r\n\r\n\x00\x00"), false)
	want[hsNotTLS]++
	check("garbage")

	// A handshake record whose message is not a ClientHello.
	probe([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00}, false)
	want[hsOther]++
	check("a record that is not a ClientHello")

	probe(nil, true) // connect, close
	want[hsClosed]++
	check("a bare TCP connect")

	hello := sslv3Hello()
	probe(hello[:20], true) // half a ClientHello, then close
	want[hsClosed]++
	check("half a ClientHello")

	// A silent connection: closed by the node at the handshake timeout.
	c, err := net.Dial("tcp", quick.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Errorf("a silent connection: read %q, %v; want the node to close it", b, err)
	}
	c.Close()
	waitFor(t, func() bool { return testutil.ToFloat64(quick.srv.listenerTLS.errs[hsTimeout]) == 1 }, 10*time.Second, "the silent connection counted")
	for r := range numHSReasons {
		if got := testutil.ToFloat64(quick.srv.listenerTLS.errs[r]); r != hsTimeout && got != 0 {
			t.Errorf("the silent connection also counted %g under %s", got, hsReasonNames[r])
		}
	}

	// The node still serves.
	if got := rawStatus(t, n.rawTLS(t, loginRequest("203.0.113.9", "carol@example.com", "wrong"))); got != http.StatusUnauthorized {
		t.Errorf("a real client after the probes: %d, want 401 from the origin", got)
	}
	// /metrics shows the counters with their reasons.
	metrics := do(t, "GET", "http://"+n.admin+"/metrics", "").body
	for r, name := range hsReasonNames {
		line := fmt.Sprintf("edge_tls_handshake_errors_total{reason=%q} %g\n", name, want[r])
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if !strings.Contains(metrics, "edge_tls_certificate_expiry_timestamp_seconds ") || strings.Contains(metrics, "edge_tls_certificate_expiry_timestamp_seconds 0\n") {
		t.Error("/metrics lacks the certificate's expiry")
	}

	// Two handshakes in progress at shutdown (a silent connection, half a
	// ClientHello): the shutdown interrupts them, and counts neither.
	for _, b := range [][]byte{nil, hello[:20]} {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return n.srv.listenerTLS.handshaking.Load() == 2 }, 10*time.Second, "two handshakes in progress")
	n.stop()
	quick.stop()
	for r := range numHSReasons {
		if count(r) != want[r] {
			t.Errorf("after the shutdown, %s counts %g, want %g", hsReasonNames[r], count(r), want[r])
		}
	}
	for line := range strings.Lines(n.logs.String() + quick.logs.String()) {
		if strings.Contains(line, `"msg":"tls certificate installed"`) {
			continue // once at start
		}
		if strings.Contains(strings.ToLower(line), "tls") || strings.Contains(strings.ToLower(line), "handshake") {
			t.Errorf("a log line at info or above about a handshake: %s", line)
		}
	}
	goleak.VerifyNone(t, ignore,
		// fasthttp's process-wide date updater and idle cleaners, which
		// exit on their own schedule (as TestRedisOutageDuringLoad).
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	)
}

// TestTLSReloadSwapsTheCertificate: a reload with another certificate is
// served to the connections made after it, while a connection made before
// it keeps working (on its certificate); a reload without a tls block
// keeps the last certificate serving; a plain node stays plain whatever a
// reload says (cmd/edge's reload warns of both: TestReloadNamesATLSChange).
func TestTLSReloadSwapsTheCertificate(t *testing.T) {
	n := startTLSNode(t, loginFixture, "first.example", 0, false)
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", n.addr, n.clientConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := serial(); got != "first.example" {
		t.Fatalf("serving %q", got)
	}
	// A keep-alive connection opened before the swap.
	before, err := tls.Dial("tcp", n.addr, n.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	br := bufio.NewReader(before)
	get := func() int {
		t.Helper()
		_ = before.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(before, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("the connection opened before the swap: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	first := get()

	dir := t.TempDir()
	n.ca.Issue(t, "second.example").Write(t, filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key"))
	path := filepath.Join(repoRoot(t), loginFixture)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, diags := builtin.Load(path, []byte(tlsPolicySrc(t, string(src), dir)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if err := n.srv.Reload(p); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != "second.example" {
		t.Errorf("after the reload: serving %q, want second.example", got)
	}
	if got := get(); got != first {
		t.Errorf("the connection opened before the swap: %d, then %d", first, got)
	}
	if cn := before.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "first.example" {
		t.Errorf("the old connection's certificate is %q", cn)
	}
	installed := func() int { return strings.Count(n.logs.String(), `"msg":"tls certificate installed"`) }
	if logs := n.logs.String(); installed() != 2 || !strings.Contains(logs, `"subject":"CN=second.example"`) {
		t.Errorf("the logs do not show the two certificates installed:\n%s", logs)
	}

	// A reload without a tls block: the listener stays TLS, on the last
	// certificate.
	p, diags = builtin.Load(path, src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if err := n.srv.Reload(p); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != "second.example" || !n.srv.ServesTLS() {
		t.Errorf("after a reload without tls: serving %q, ServesTLS %v", got, n.srv.ServesTLS())
	}
	if installed() != 2 {
		t.Errorf("a reload without tls logged a certificate installed:\n%s", n.logs.String())
	}

	// A plain node given a policy with tls stays plain.
	plain := startTLSNode(t, loginFixture, "edge.example", 0, true)
	p, diags = builtin.Load(path, []byte(tlsPolicySrc(t, string(src), dir)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if err := plain.srv.Reload(p); err != nil {
		t.Fatal(err)
	}
	if plain.srv.ServesTLS() {
		t.Error("a reload turned a plain node's listener into TLS")
	}
	if got := rawStatus(t, raw(t, plain.addr, loginRequest("203.0.113.7", "alice@example.com", "wrong"))); got != http.StatusUnauthorized {
		t.Errorf("plain HTTP after the reload: %d, want 401 from the origin", got)
	}
}
