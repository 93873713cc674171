package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
)

// Redis as managed services run it (docs/deploying.md, "Redis over TLS,
// ACLs and Sentinel"): real redis-server processes over TLS with a
// throwaway CA, with ACL users, and behind redis-sentinel.

// transports are the ways a test reaches a real Redis: start returns the
// store options that reach it (URL and TLS) and a plain client of its
// (primary) server, for inspecting it.
var transports = []struct {
	name  string
	start func(t *testing.T) (Options, *redis.Client)
}{
	{"plain", func(t *testing.T) (Options, *redis.Client) {
		addr := redisAddr(t)
		return Options{URL: "redis://" + addr + "/0"}, rawClient(t, addr)
	}},
	{"tls", func(t *testing.T) (Options, *redis.Client) {
		srv := testredis.StartTLS(t, testredis.TLSOptions{})
		return Options{URL: srv.URL(), TLS: TLS(srv.TLS())}, tlsClient(t, srv)
	}},
	{"sentinel", func(t *testing.T) (Options, *redis.Client) {
		s := testredis.StartSentinel(t, testredis.SentinelOptions{})
		return Options{URL: s.URL()}, rawClient(t, s.Primary.Addr())
	}},
	{"tls+sentinel", func(t *testing.T) (Options, *redis.Client) {
		s := testredis.StartSentinel(t, testredis.SentinelOptions{TLS: true})
		return Options{URL: s.URL(), TLS: TLS(s.TLS())}, tlsClient(t, s.Primary)
	}},
}

// tlsClient is rawClient for a TLS server.
func tlsClient(t testing.TB, srv *testredis.Server) *redis.Client {
	t.Helper()
	cfg, err := TLS(srv.TLS()).Config()
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, TLSConfig: cfg})
	t.Cleanup(func() { c.Close() })
	return c
}

func oneTake(t *testing.T, s *Store) error {
	t.Helper()
	op := []rules.Op{{Kind: rules.OpTake, Algorithm: rules.FixedWindow, Key: rules.Key{'m', 't'}, Limit: 100, PeriodUS: 60_000_000, Cost: 1, Enforce: true}}
	return s.Take(context.Background(), time.Now(), op, make([]rules.Result, 1))
}

// TestMutualTLS: a server that demands client certificates
// (tls-auth-clients yes) refuses a client without one and serves one with
// it; a client that trusts another CA refuses the server.
func TestMutualTLS(t *testing.T) {
	ca := testredis.NewCA(t, "edge mTLS CA")
	srv := testredis.StartTLS(t, testredis.TLSOptions{AuthClients: "yes", CA: ca})
	files := TLS(srv.TLS())
	ctx := context.Background()
	tests := []struct {
		name string
		tls  TLS
		ok   bool
	}{
		{"client certificate", files, true},
		{"no client certificate", TLS{CAFile: files.CAFile}, false},
		{"another CA", TLS{CAFile: testredis.NewCA(t, "not the server's CA").File, CertFile: files.CertFile, KeyFile: files.KeyFile}, false},
		{"system pool", TLS{CertFile: files.CertFile, KeyFile: files.KeyFile}, false},
		{"server name not in the certificate", TLS{CAFile: files.CAFile, CertFile: files.CertFile, KeyFile: files.KeyFile, ServerName: "elsewhere.test"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, Options{URL: srv.URL(), TLS: tt.tls, Timeout: time.Second, Prefix: testPrefix("mtls")})
			defer s.Close()
			err := s.Ping(ctx)
			if tt.ok {
				if err != nil {
					t.Fatalf("Ping: %v", err)
				}
				if err := oneTake(t, s); err != nil {
					t.Fatalf("Take: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Ping succeeded, want a TLS failure")
			}
			if err := oneTake(t, s); err == nil {
				t.Fatal("Take succeeded, want a TLS failure")
			}
			var verr *tls.CertificateVerificationError
			var uerr x509.UnknownAuthorityError
			t.Logf("refused: %v (verification error: %v, unknown authority: %v)", err, errors.As(err, &verr), errors.As(err, &uerr))
		})
	}
}

// TestTLSSettingsNeedTLSURL: CA, certificate or server name on a plain
// redis:// URL is an error at New, not silently a plain connection.
func TestTLSSettingsNeedTLSURL(t *testing.T) {
	for _, url := range []string{"redis://127.0.0.1:6379/0", "redis+sentinel://m@127.0.0.1:26379"} {
		if _, err := New(Options{URL: url, TLS: TLS{ServerName: "redis.test"}}); err == nil {
			t.Errorf("%s with TLS settings: got no error", url)
		}
	}
	if _, err := New(Options{URL: "rediss://127.0.0.1:6379/0", TLS: TLS{CAFile: "/nonexistent/ca.pem"}}); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("missing ca_file: got %v, want an error naming ca_file", err)
	}
	if _, err := New(Options{URL: "rediss://127.0.0.1:6379/0", TLS: TLS{CertFile: "/x.pem"}}); err == nil {
		t.Error("cert_file without key_file: got no error")
	}
}

// aclRule returns docs/deploying.md's minimal ACL rule for the edge's
// user, what follows "ACL SETUSER edge reset on >PASSWORD ~edge:*" on its
// line: the test runs as exactly the user the docs tell operators to make.
func aclRule(t testing.TB) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/deploying.md")
	if err != nil {
		t.Fatal(err)
	}
	const head = "ACL SETUSER edge reset on >PASSWORD ~edge:* "
	for line := range strings.Lines(string(doc)) {
		if rest, ok := strings.CutPrefix(line, head); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("docs/deploying.md has no line starting %q", head)
	return nil
}

// TestACLUser: an ACL user with exactly the documented rule (aclRule; on
// the test's key prefix instead of edge:*) runs the conformance tables, the shared state and the key
// fingerprint; a wrong password is an error at Ping naming the refusal
// and never the password.
func TestACLUser(t *testing.T) {
	srv := testredis.Start(t)
	prefix := testPrefix("acl")
	if _, err := srv.Do(append([]string{"ACL", "SETUSER", "edge", "reset", "on", ">s3cret-pass", "~" + prefix + "*"}, aclRule(t)...)...); err != nil {
		t.Fatal(err)
	}
	url := "redis://edge:s3cret-pass@" + srv.Addr() + "/0"
	ctx := context.Background()
	s := mustNew(t, Options{URL: url, Timeout: time.Second, Prefix: prefix})
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping as the ACL user: %v", err)
	}
	if err := oneTake(t, s); err != nil {
		t.Fatalf("Take as the ACL user: %v", err)
	}
	if err := s.SharedSet(ctx, "dry-run", "rule", "on"); err != nil {
		t.Fatalf("shared state as the ACL user: %v", err)
	}
	if _, err := s.ClaimKeyFingerprint(ctx, "fp", false); err != nil {
		t.Fatalf("key fingerprint as the ACL user: %v", err)
	}
	if _, err := s.ClaimKeyFingerprint(ctx, "fp2", true); err != nil {
		t.Fatalf("key fingerprint overwrite as the ACL user: %v", err)
	}
	if _, err := s.Evictions(ctx); err != nil {
		t.Fatalf("eviction check as the ACL user: %v", err)
	}
	// Every algorithm, sliding_log's sorted set included.
	if err := s.Take(ctx, time.Now(), multiOps("acl"), make([]rules.Result, 5)); err != nil {
		t.Fatalf("every algorithm as the ACL user: %v", err)
	}
	// SCRIPT FLUSH, as after a failover: the EVAL fallback is allowed too.
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if err := oneTake(t, s); err != nil || s.Stats().NoScript != 1 {
		t.Fatalf("Take after SCRIPT FLUSH as the ACL user: %v (NoScript %d)", err, s.Stats().NoScript)
	}
	// The password from Options.Password (password_env) replaces the URL's.
	s2 := mustNew(t, Options{URL: "redis://edge@" + srv.Addr() + "/0", Password: "s3cret-pass", Timeout: time.Second, Prefix: prefix})
	defer s2.Close()
	if err := s2.Ping(ctx); err != nil {
		t.Fatalf("Ping with Options.Password: %v", err)
	}

	bad := mustNew(t, Options{URL: "redis://edge:wrong-pass@" + srv.Addr() + "/0", Timeout: time.Second, Prefix: prefix})
	defer bad.Close()
	err := bad.Ping(ctx)
	if err == nil {
		t.Fatal("Ping with a wrong password succeeded")
	}
	if !strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "wrong-pass") {
		t.Errorf("wrong password: got %q, want WRONGPASS and never the password", err)
	}
	// A key outside the user's pattern is refused by Redis: the rule
	// really is that narrow.
	other := mustNew(t, Options{URL: url, Timeout: time.Second, Prefix: "elsewhere:"})
	defer other.Close()
	if err := oneTake(t, other); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("Take outside the ACL's keys: got %v, want NOPERM", err)
	}
}

// TestSentinelAuth: sentinels with a requirepass of their own need
// SentinelPassword; without it the store cannot find the master.
func TestSentinelAuth(t *testing.T) {
	sn := testredis.StartSentinel(t, testredis.SentinelOptions{Password: "sentinel-pass"})
	ctx := context.Background()
	s := mustNew(t, Options{URL: sn.URL(), SentinelPassword: "sentinel-pass", Timeout: time.Second, Prefix: testPrefix("sauth")})
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping with the sentinel's password: %v", err)
	}
	none := mustNew(t, Options{URL: sn.URL(), Timeout: time.Second, Prefix: testPrefix("sauth")})
	defer none.Close()
	if err := none.Ping(ctx); err == nil {
		t.Fatal("Ping without the sentinel's password succeeded")
	}
}

// slowProxy forwards TCP connections to addr, holding each connection's
// first bytes from the server (for TLS: the ServerHello) back by delay, as
// a distant or busy server's handshake would.
func slowProxy(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			wg.Go(func() {
				buf := make([]byte, 1)
				if _, err := up.Read(buf); err == nil {
					time.Sleep(delay) // the latency under test, not a wait for an event
					if _, err := c.Write(buf); err == nil {
						_, _ = io.Copy(c, up)
					}
				}
				c.Close()
			})
		}
	})
	return ln.Addr().String()
}

// TestHandshakeOutlastsTheBudget: a TLS handshake three times longer than
// the call budget still connects, because dialing has its own budget
// (Options.DialTimeout), and Ping, as the node runs it at start, leaves
// the flushers' connections open, so the requests after it are served on
// them: they do not dial, which over this proxy would outlast their
// budget. With the dial bound to the call budget, Ping fails. (The budget
// is 100ms rather than the default 5ms so that a busy machine's pauses do
// not fail the takes; the handshake's delay is three budgets.)
func TestHandshakeOutlastsTheBudget(t *testing.T) {
	const budget = 100 * time.Millisecond
	srv := testredis.StartTLS(t, testredis.TLSOptions{})
	proxy := slowProxy(t, srv.Addr(), 3*budget)
	files := TLS(srv.TLS())
	files.ServerName = "localhost"
	s := mustNew(t, Options{URL: "rediss://" + proxy + "/0", TLS: files, Timeout: budget, Prefix: testPrefix("handshake")})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping over a slow handshake: %v", err)
	}
	dialed := srv.Clients(t)
	// Requests one at a time, on the warm connections: none may dial.
	for i := range 50 {
		if err := oneTake(t, s); err != nil {
			t.Fatalf("take %d after Ping: %v", i, err)
		}
	}
	if got := srv.Clients(t); got != dialed {
		t.Errorf("clients connected: %d after Ping, %d after the takes: a take dialed", dialed, got)
	}

	// The same store bound to the call budget for dialing cannot connect.
	short := mustNew(t, Options{URL: "rediss://" + proxy + "/0", TLS: files, Timeout: budget, DialTimeout: budget, Prefix: testPrefix("handshake")})
	defer short.Close()
	if err := short.Ping(ctx); err == nil {
		t.Error("Ping with the call budget for dialing succeeded over a handshake three budgets long: the proxy does not delay")
	}
}

// TestParseSentinelURL: the grammar of redis+sentinel URLs.
func TestParseSentinelURL(t *testing.T) {
	tests := []struct {
		rest               string
		master, user, pass string
		addrs              []string
		db                 int
		wantErr            bool
	}{
		{rest: "mymaster@10.0.0.1:26379,10.0.0.2:26379", master: "mymaster", addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}},
		{rest: "edge:s3/cr@t@my.master-1@[::1]:26379/3", master: "my.master-1", user: "edge", pass: "s3/cr@t", addrs: []string{"[::1]:26379"}, db: 3},
		{rest: ":p%40ss@m@h:1", master: "m", pass: "p@ss", addrs: []string{"h:1"}},
		{rest: "10.0.0.1:26379", wantErr: true},
		{rest: "edge:pw@10.0.0.1:26379", wantErr: true},
		{rest: "m@", wantErr: true},
		{rest: "m@h", wantErr: true},
		{rest: "m@h:0", wantErr: true},
		{rest: "m@h:1/x", wantErr: true},
		{rest: "m@h:1?x=y", wantErr: true},
		{rest: "u:%zz@m@h:1", wantErr: true},
	}
	for _, tt := range tests {
		o, err := parseSentinelURL(tt.rest)
		if tt.wantErr {
			if err == nil {
				t.Errorf("%q: got no error", tt.rest)
			} else if strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "pw") {
				t.Errorf("%q: the error shows the password: %v", tt.rest, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.rest, err)
			continue
		}
		if o.MasterName != tt.master || o.Username != tt.user || o.Password != tt.pass || o.DB != tt.db || strings.Join(o.SentinelAddrs, ",") != strings.Join(tt.addrs, ",") {
			t.Errorf("%q: got master %q user %q pass %q db %d addrs %v, want %q %q %q %d %v", tt.rest, o.MasterName, o.Username, o.Password, o.DB, o.SentinelAddrs, tt.master, tt.user, tt.pass, tt.db, tt.addrs)
		}
	}
}
