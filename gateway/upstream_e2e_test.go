package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testcert"
	"github.com/edge-gateway/edge/internal/testnet"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// End to end: the edge in front of an origin over HTTPS (a Go net/http
// server with certificates from a throwaway internal/testcert CA), and the
// origin's passive health (docs/deploying.md, "The origin over HTTPS, and
// its health").

// upIssue signs a leaf for the names (DNS names, or IP addresses when
// they parse as one) with ca, for a server or a client.
func upIssue(t testing.TB, ca *testcert.CA, cn string, client bool, names ...string) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	l := ca.IssueSpec(t, testcert.Spec{CN: cn, Client: client, Names: names})
	return l.CertPEM, l.KeyPEM, l.TLS(t)
}

// upOrigin is an origin on loopback that records what each request
// arrived with: the SNI, the Host, the client certificate's name.
type upOrigin struct {
	srv        *httptest.Server
	addr       string        // 127.0.0.1:PORT
	status     atomic.Int32  // the status it answers (default 200)
	hold       chan struct{} // when set, each request waits for it to close
	requests   atomic.Int32  // requests that reached the handler
	handshakes atomic.Int32  // TLS ClientHellos
	closed     atomic.Int32  // connections closed

	mu                 sync.Mutex
	sni, host, cn, via []string
}

// upOriginOptions: the origin's certificate (nil: plain HTTP), whether it
// requires a client certificate from clientCA, and whether its handler
// waits on hold.
type upOriginOptions struct {
	cert     *tls.Certificate
	clientCA *testcert.CA
	hold     bool
}

func startUpOrigin(t *testing.T, o upOriginOptions) *upOrigin {
	t.Helper()
	u := &upOrigin{}
	u.status.Store(200)
	if o.hold {
		u.hold = make(chan struct{})
	}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		u.mu.Lock()
		u.host = append(u.host, r.Host)
		u.via = append(u.via, r.Proto)
		if r.TLS != nil {
			u.sni = append(u.sni, r.TLS.ServerName)
			if len(r.TLS.PeerCertificates) > 0 {
				u.cn = append(u.cn, r.TLS.PeerCertificates[0].Subject.CommonName)
			}
		}
		u.mu.Unlock()
		if u.hold != nil {
			<-u.hold
		}
		w.WriteHeader(int(u.status.Load()))
		io.WriteString(w, "origin says hi\n")
	}))
	u.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	u.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			u.closed.Add(1)
		}
	}
	if o.cert != nil {
		cert := *o.cert
		u.srv.TLS = &tls.Config{
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				u.handshakes.Add(1)
				return &cert, nil
			},
		}
		if o.clientCA != nil {
			u.srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
			u.srv.TLS.ClientCAs = o.clientCA.Pool()
		}
		u.srv.StartTLS()
	} else {
		u.srv.Start()
	}
	// Close after the handler is released (cleanups run last first).
	t.Cleanup(u.srv.Close)
	if u.hold != nil {
		t.Cleanup(func() { close(u.hold) })
	}
	u.addr = u.srv.Listener.Addr().String()
	return u
}

func (u *upOrigin) seen() (sni, host, cn []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.sni...), append([]string(nil), u.host...), append([]string(nil), u.cn...)
}

func (u *upOrigin) port() string {
	_, p, _ := net.SplitHostPort(u.addr)
	return p
}

// upNode is an edge node serving the policy file at path.
type upNode struct {
	srv         *Server
	path        string
	addr, admin string
}

// upPolicy writes a policy with the edge block's body edge into dir, with
// files beside it, and returns its path.
func upPolicy(t testing.TB, dir, edge string, files map[string][]byte) string {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "policies.hcl")
	src := "edge {\n" + edge + "\n}\n\nrule \"api\" {\n  paths = [\"/api/*\"]\n  key = [\"ip\"]\n  limit = 1000\n  period = \"1m\"\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func upLoadPolicy(t *testing.T, path string) *rules.Policy {
	t.Helper()
	p, diags := builtin.LoadFile(path)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", path, diags.Error())
	}
	return p
}

// startUpNode serves the policy at path (its own upstream, unless flag,
// the -upstream flag, is set).
func startUpNode(t *testing.T, path, flag string) *upNode {
	t.Helper()
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := New(Options{Extensions: builtin.Extensions(), Policy: upLoadPolicy(t, path), Store: st, Upstream: flag, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	ln, aln := listen(t), listen(t)
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	go func() { defer wg.Done(); _ = srv.ServeAdmin(ctx, aln) }()
	return &upNode{srv: srv, path: path, addr: ln.Addr().String(), admin: aln.Addr().String()}
}

func (n *upNode) reload(t *testing.T) {
	t.Helper()
	if err := n.srv.Reload(upLoadPolicy(t, n.path)); err != nil {
		t.Fatal(err)
	}
}

// get sends GET /api/x with Host: app.example.com and returns the status.
func (n *upNode) get(t *testing.T) int {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+n.addr+"/api/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "app.example.com"
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (n *upNode) failures(reason string) int {
	for r, name := range failReasonNames {
		if name == reason {
			return int(testutil.ToFloat64(n.srv.m.upstreamFailures[r]))
		}
	}
	panic("no reason " + reason)
}

func (n *upNode) readyz(t *testing.T, query string) (int, upstreamStatus) {
	t.Helper()
	r := do(t, "GET", "http://"+n.admin+"/readyz"+query, "")
	var body struct {
		Status   string         `json:"status"`
		Upstream upstreamStatus `json:"upstream"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("/readyz: %v: %q", err, r.body)
	}
	return r.status, body.Upstream
}

// TestUpstreamHTTPSWithCAFile: an https origin whose certificate comes from
// the policy's ca_file is proxied; it sees the upstream URL's host as SNI
// and the client's Host, and an HTTP/1.0 request without Host arrives under
// the upstream's address.
func TestUpstreamHTTPSWithCAFile(t *testing.T) {
	ca := testcert.NewCASpec(t, testcert.Spec{CN: "origin CA"})
	_, _, cert := upIssue(t, ca, "origin", false, "localhost")
	o := startUpOrigin(t, upOriginOptions{cert: &cert})
	path := upPolicy(t, t.TempDir(), `
  upstream = "https://localhost:`+o.port()+`"
  upstream_tls {
    ca_file = "ca.pem"
  }`, map[string][]byte{"ca.pem": ca.PEM})
	n := startUpNode(t, path, "")
	if got := n.get(t); got != 200 {
		t.Fatalf("through the edge: %d, want 200", got)
	}
	sni, host, _ := o.seen()
	if len(sni) != 1 || sni[0] != "localhost" || host[0] != "app.example.com" {
		t.Errorf("the origin saw SNI %q and Host %q; want localhost and the client's app.example.com", sni, host)
	}
	resp := raw(t, n.addr, "GET /api/x HTTP/1.0\r\n\r\n")
	if rawStatus(t, resp) != 200 {
		t.Fatalf("HTTP/1.0 without Host: %q", resp)
	}
	_, host, _ = o.seen()
	if want := "localhost:" + o.port(); host[len(host)-1] != want {
		t.Errorf("HTTP/1.0 without Host reached the origin as Host %q, want %q", host[len(host)-1], want)
	}
	if n.failures("tls") != 0 || testutil.ToFloat64(n.srv.m.upstreamErrors) != 0 {
		t.Error("failures counted on a healthy origin")
	}
}

// TestUpstreamHTTPSSystemPoolRefusesPrivateCA: without ca_file the system's
// pool is used, which does not hold the test CA: every request is a 502
// and a tls failure, one handshake each (no retries), and the node goes on
// serving.
func TestUpstreamHTTPSSystemPoolRefusesPrivateCA(t *testing.T) {
	ca := testcert.NewCASpec(t, testcert.Spec{CN: "private CA"})
	_, _, cert := upIssue(t, ca, "origin", false, "localhost")
	o := startUpOrigin(t, upOriginOptions{cert: &cert})
	n := startUpNode(t, upPolicy(t, t.TempDir(), `upstream = "https://localhost:`+o.port()+`"`, nil), "")
	for i := 1; i <= 3; i++ {
		if got := n.get(t); got != 502 {
			t.Fatalf("request %d: %d, want 502", i, got)
		}
		if n.failures("tls") != i || int(testutil.ToFloat64(n.srv.m.upstreamErrors)) != i {
			t.Fatalf("request %d: tls failures %d, upstream errors %v", i, n.failures("tls"), testutil.ToFloat64(n.srv.m.upstreamErrors))
		}
	}
	if o.requests.Load() != 0 || o.handshakes.Load() != 3 {
		t.Errorf("origin: %d requests, %d handshakes; want 0 and 3", o.requests.Load(), o.handshakes.Load())
	}
	if _, up := n.readyz(t, ""); up.LastFailureReason != "tls" || up.ConsecutiveFailures != 3 {
		t.Errorf("/readyz upstream: %+v", up)
	}
}

// TestUpstreamMTLS: an origin that requires a client certificate refuses
// an edge without cert_file (a 502, counted as tls) and serves one with
// it, seeing the certificate's name.
func TestUpstreamMTLS(t *testing.T) {
	ca := testcert.NewCASpec(t, testcert.Spec{CN: "origin CA"})
	_, _, cert := upIssue(t, ca, "origin", false, "localhost")
	clientCA := testcert.NewCASpec(t, testcert.Spec{CN: "client CA"})
	ccert, ckey, _ := upIssue(t, clientCA, "edge-node", true)
	o := startUpOrigin(t, upOriginOptions{cert: &cert, clientCA: clientCA})
	dir := t.TempDir()
	edge := `
  upstream = "https://localhost:` + o.port() + `"
  upstream_tls {
    ca_file = "ca.pem"
    %s
  }`
	files := map[string][]byte{"ca.pem": ca.PEM, "client.pem": ccert, "client.key": ckey}
	n := startUpNode(t, upPolicy(t, dir, strings.Replace(edge, "%s", "", 1), files), "")
	if got := n.get(t); got != 502 {
		t.Fatalf("without a client certificate: %d, want 502", got)
	}
	// One handshake: the refusal is a TLS alert, and a request the origin
	// refused is not sent again (fasthttp would try a GET five times).
	if n.failures("tls") != 1 || o.requests.Load() != 0 || o.handshakes.Load() != 1 {
		t.Errorf("tls failures %d, origin requests %d, handshakes %d; want 1, 0 and 1", n.failures("tls"), o.requests.Load(), o.handshakes.Load())
	}
	upPolicy(t, dir, strings.Replace(edge, "%s", `cert_file = "client.pem"
    key_file  = "client.key"`, 1), nil)
	n.reload(t)
	if got := n.get(t); got != 200 {
		t.Fatalf("with the client certificate: %d, want 200", got)
	}
	if _, _, cn := o.seen(); len(cn) != 1 || cn[0] != "edge-node" {
		t.Errorf("the origin saw client certificates %q, want [edge-node]", cn)
	}
}

// TestUpstreamServerName: an origin addressed by IP whose certificate names
// only origin.internal fails verification until server_name says that
// name; then it sees it as SNI, and the client's Host as Host.
func TestUpstreamServerName(t *testing.T) {
	ca := testcert.NewCASpec(t, testcert.Spec{CN: "origin CA"})
	_, _, cert := upIssue(t, ca, "origin", false, "origin.internal")
	o := startUpOrigin(t, upOriginOptions{cert: &cert})
	dir := t.TempDir()
	edge := `
  upstream = "https://127.0.0.1:` + o.port() + `"
  upstream_tls {
    ca_file = "ca.pem"
    %s
  }`
	n := startUpNode(t, upPolicy(t, dir, strings.Replace(edge, "%s", "", 1), map[string][]byte{"ca.pem": ca.PEM}), "")
	if got := n.get(t); got != 502 || n.failures("tls") != 1 {
		t.Fatalf("a certificate for another name: %d, %d tls failures; want 502 and 1", got, n.failures("tls"))
	}
	upPolicy(t, dir, strings.Replace(edge, "%s", `server_name = "origin.internal"`, 1), nil)
	n.reload(t)
	if got := n.get(t); got != 200 {
		t.Fatalf("with server_name: %d, want 200", got)
	}
	sni, host, _ := o.seen()
	if len(sni) != 1 || sni[0] != "origin.internal" || host[0] != "app.example.com" {
		t.Errorf("the origin saw SNI %q, Host %q; want origin.internal and app.example.com", sni, host)
	}
}

// TestUpstreamReloadSwapsTLS: a reload that rewrote the client certificate
// or the CA in place takes effect on the next request (a new client: the
// old one's pooled connection is closed), and a reload that changes
// nothing keeps the client and its connections.
func TestUpstreamReloadSwapsTLS(t *testing.T) {
	ca := testcert.NewCASpec(t, testcert.Spec{CN: "origin CA"})
	_, _, cert := upIssue(t, ca, "origin", false, "localhost")
	clientCA := testcert.NewCASpec(t, testcert.Spec{CN: "client CA"})
	certA, keyA, _ := upIssue(t, clientCA, "edge-a", true)
	certB, keyB, _ := upIssue(t, clientCA, "edge-b", true)
	o := startUpOrigin(t, upOriginOptions{cert: &cert, clientCA: clientCA})
	dir := t.TempDir()
	path := upPolicy(t, dir, `
  upstream = "https://localhost:`+o.port()+`"
  upstream_tls {
    ca_file   = "ca.pem"
    cert_file = "client.pem"
    key_file  = "client.key"
  }`, map[string][]byte{"ca.pem": ca.PEM, "client.pem": certA, "client.key": keyA})
	n := startUpNode(t, path, "")
	if got := n.get(t); got != 200 {
		t.Fatalf("first request: %d", got)
	}
	before := n.srv.state.Load().origin
	n.reload(t) // nothing changed
	if n.srv.state.Load().origin != before {
		t.Error("a reload that changed nothing built a new origin client")
	}
	if got := n.get(t); got != 200 || o.handshakes.Load() != 1 {
		t.Fatalf("after a no-op reload: %d, %d handshakes; want 200 on the pooled connection (1)", got, o.handshakes.Load())
	}

	upPolicy(t, dir, `
  upstream = "https://localhost:`+o.port()+`"
  upstream_tls {
    ca_file   = "ca.pem"
    cert_file = "client.pem"
    key_file  = "client.key"
  }`, map[string][]byte{"client.pem": certB, "client.key": keyB})
	n.reload(t)
	if got := n.get(t); got != 200 {
		t.Fatalf("after the certificate swap: %d", got)
	}
	if _, _, cn := o.seen(); cn[len(cn)-1] != "edge-b" {
		t.Errorf("after the swap the origin saw %q, want edge-b last", cn)
	}
	waitFor(t, func() bool { return o.closed.Load() >= 1 }, 15*time.Second, "the old client's idle connection to close")

	other := testcert.NewCASpec(t, testcert.Spec{CN: "another CA"})
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), other.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	n.reload(t)
	if got := n.get(t); got != 502 || n.failures("tls") != 1 {
		t.Fatalf("after a CA that did not sign the origin: %d, %d tls failures; want 502 and 1", got, n.failures("tls"))
	}
}

// TestUpstreamPassiveHealth: an origin answering 503s turns unhealthy at
// the fifth in a row, on /readyz (strict readiness unaffected) and in the
// metrics; its first 200 makes it healthy again. The 503s reach the client
// as the origin sent them.
func TestUpstreamPassiveHealth(t *testing.T) {
	o := startUpOrigin(t, upOriginOptions{})
	n := startUpNode(t, upPolicy(t, t.TempDir(), `upstream = "http://`+o.addr+`"`, nil), "")
	o.status.Store(503)
	for i := 1; i <= 4; i++ {
		if got := n.get(t); got != 503 {
			t.Fatalf("request %d: %d, want the origin's 503", i, got)
		}
	}
	if _, up := n.readyz(t, ""); !up.Healthy || up.ConsecutiveFailures != 4 || up.LastFailureReason != "status_503" {
		t.Errorf("after 4 503s: %+v", up)
	}
	n.get(t)
	status, up := n.readyz(t, "?strict=1")
	if status != 200 {
		t.Errorf("/readyz?strict=1 with the origin unhealthy: %d, want 200 (the origin is shared by the fleet)", status)
	}
	if up.Healthy || up.ConsecutiveFailures != 5 || up.UnhealthySince == "" || up.LastFailure == "" {
		t.Errorf("after 5 503s: %+v", up)
	}
	metrics := do(t, "GET", "http://"+n.admin+"/metrics", "").body
	for _, want := range []string{
		"edge_upstream_healthy 0",
		"edge_upstream_consecutive_failures 5",
		`edge_upstream_failures_total{reason="status_503"} 5`,
		`edge_upstream_failures_total{reason="timeout"} 0`,
		"edge_upstream_errors_total 0", // the origin answered every one
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	o.status.Store(200)
	if got := n.get(t); got != 200 {
		t.Fatalf("recovered origin: %d", got)
	}
	if _, up := n.readyz(t, ""); !up.Healthy || up.ConsecutiveFailures != 0 || up.UnhealthySince != "" || up.LastFailureReason != "status_503" {
		t.Errorf("after a 200: %+v", up)
	}
	metrics = do(t, "GET", "http://"+n.admin+"/metrics", "").body
	if !strings.Contains(metrics, "edge_upstream_healthy 1\n") || !strings.Contains(metrics, "edge_upstream_consecutive_failures 0\n") {
		t.Error("the gauges did not recover")
	}
}

// TestUpstreamTimeoutCounts: an origin that holds the request past
// upstream_timeout is a 504 and a timeout failure; the request reached it
// once (a timed-out GET is not sent again).
func TestUpstreamTimeoutCounts(t *testing.T) {
	o := startUpOrigin(t, upOriginOptions{hold: true})
	n := startUpNode(t, upPolicy(t, t.TempDir(), `
  upstream         = "http://`+o.addr+`"
  upstream_timeout = "200ms"`, nil), "")
	if got := n.get(t); got != 504 {
		t.Fatalf("a held request: %d, want 504", got)
	}
	if n.failures("timeout") != 1 || o.requests.Load() != 1 {
		t.Errorf("timeout failures %d, origin requests %d; want 1 and 1", n.failures("timeout"), o.requests.Load())
	}
	if _, up := n.readyz(t, ""); up.LastFailureReason != "timeout" {
		t.Errorf("/readyz upstream: %+v", up)
	}
}

// TestUpstreamConnectRefused: no origin listening is a 502 and a connect
// failure.
func TestUpstreamConnectRefused(t *testing.T) {
	dead := testnet.DeadAddr(t)
	n := startUpNode(t, upPolicy(t, t.TempDir(), `upstream = "https://`+dead+`"`, nil), "")
	if got := n.get(t); got != 502 || n.failures("connect") != 1 {
		t.Errorf("%d, %d connect failures; want 502 and 1", got, n.failures("connect"))
	}
}

// TestUpstreamFlag: the -upstream flag takes https:// and uses the policy's
// upstream_tls; the gateway checks it as the compiler checks the policy.
func TestUpstreamFlag(t *testing.T) {
	ca := testcert.NewCASpec(t, testcert.Spec{CN: "origin CA"})
	_, _, cert := upIssue(t, ca, "origin", false, "localhost")
	o := startUpOrigin(t, upOriginOptions{cert: &cert})
	path := upPolicy(t, t.TempDir(), `
  upstream = "https://origin.invalid:1"
  upstream_tls {
    ca_file = "ca.pem"
  }`, map[string][]byte{"ca.pem": ca.PEM})
	n := startUpNode(t, path, "https://localhost:"+o.port())
	if got := n.get(t); got != 200 {
		t.Errorf("https -upstream with the policy's ca_file: %d, want 200", got)
	}
	st, _ := memstore.New(memstore.Options{})
	defer st.Close()
	for _, bad := range []string{"ftp://localhost:21", "https://localhost/app", "localhost:80"} {
		if _, err := New(Options{Extensions: builtin.Extensions(), Policy: upLoadPolicy(t, path), Store: st, Upstream: bad}); err == nil {
			t.Errorf("-upstream %q accepted", bad)
		}
	}
}

// TestUpstreamTLSHandshakeTimeout: an origin that accepts the connection
// and never answers the ClientHello is a 504 and a timeout failure once
// upstream_timeout has passed.
func TestUpstreamTLSHandshakeTimeout(t *testing.T) {
	ln := listen(t)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held silent until the test ends
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	n := startUpNode(t, upPolicy(t, t.TempDir(), `
  upstream         = "https://`+ln.Addr().String()+`"
  upstream_timeout = "200ms"`, nil), "")
	if got := n.get(t); got != 504 || n.failures("timeout") != 1 {
		t.Errorf("%d, %d timeout failures; want 504 and 1", got, n.failures("timeout"))
	}
}

// TestUpstreamHTTPSToPlainOrigin: https:// to an origin speaking plain
// HTTP is a 502 and a tls failure.
func TestUpstreamHTTPSToPlainOrigin(t *testing.T) {
	o := startUpOrigin(t, upOriginOptions{})
	n := startUpNode(t, upPolicy(t, t.TempDir(), `upstream = "https://`+o.addr+`"`, nil), "")
	if got := n.get(t); got != 502 || n.failures("tls") != 1 || o.requests.Load() != 0 {
		t.Errorf("%d, %d tls failures, %d origin requests; want 502, 1 and 0", got, n.failures("tls"), o.requests.Load())
	}
}

// TestUpstreamSchemeIsTheOrigins: the scheme the origin is spoken to is
// the upstream's, whatever the client's: a client over the edge's TLS
// listener reaches an http:// origin, and a plain client an https:// one
// (fasthttp's client refuses a request whose scheme is not its own).
func TestUpstreamSchemeIsTheOrigins(t *testing.T) {
	ca := testcert.NewCASpec(t, testcert.Spec{CN: "CA"})
	edgeCert, edgeKey, _ := upIssue(t, ca, "edge", false, "127.0.0.1")
	_, _, originCert := upIssue(t, ca, "origin", false, "localhost")
	plainOrigin := startUpOrigin(t, upOriginOptions{})
	tlsOrigin := startUpOrigin(t, upOriginOptions{cert: &originCert})
	files := map[string][]byte{"ca.pem": ca.PEM, "edge.pem": edgeCert, "edge.key": edgeKey}
	tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	for _, tt := range []struct {
		name, edge, scheme string
		origin             *upOrigin
	}{
		{"TLS client, http origin", `upstream = "http://` + plainOrigin.addr + `"`, "https", plainOrigin},
		{"TLS client, https origin", `upstream = "https://localhost:` + tlsOrigin.port() + `"
  upstream_tls {
    ca_file = "ca.pem"
  }`, "https", tlsOrigin},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := startUpNode(t, upPolicy(t, t.TempDir(), tt.edge+`
  tls {
    cert_file = "edge.pem"
    key_file  = "edge.key"
  }`, files), "")
			before := tt.origin.requests.Load()
			resp, err := tlsClient.Get(tt.scheme + "://" + n.addr + "/api/x")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || tt.origin.requests.Load() != before+1 {
				t.Errorf("%d, origin requests %d; want 200 and 1", resp.StatusCode, tt.origin.requests.Load()-before)
			}
		})
	}
}
