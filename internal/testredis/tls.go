package testredis

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/edge-gateway/edge/internal/testcert"
)

// TLSFiles are PEM files of a TLS client: the CA its server's certificate
// must lead to and the client's own certificate and key. Its fields are
// redisstore.TLS's, so that one converts to the other.
type TLSFiles struct {
	CAFile            string
	CertFile, KeyFile string
	ServerName        string
}

// CA is a throwaway certificate authority made for one test (a
// testcert.CA), whose files live in the test's temporary directory.
type CA struct {
	t   testing.TB
	dir string
	ca  *testcert.CA
	// File is the CA certificate's PEM file.
	File string
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca := &CA{t: t, dir: t.TempDir(), ca: testcert.NewCASpec(t, testcert.Spec{CN: name})}
	ca.File = filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(ca.File, ca.ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Issue makes a certificate for name signed by the CA and returns its PEM
// files. A server certificate is valid for 127.0.0.1, localhost and name;
// a client certificate for client authentication only.
func (ca *CA) Issue(name string, client bool) (certFile, keyFile string) {
	t := ca.t
	t.Helper()
	spec := testcert.Spec{CN: name, Client: client}
	if !client {
		spec.Names = []string{"localhost", name, "127.0.0.1"}
	}
	certFile = filepath.Join(ca.dir, name+".pem")
	keyFile = filepath.Join(ca.dir, name+".key")
	ca.ca.IssueSpec(t, spec).Write(t, certFile, keyFile)
	return certFile, keyFile
}

// TLSOptions configure StartTLS.
type TLSOptions struct {
	// AuthClients is redis-server's tls-auth-clients: "no" (the default
	// here), "yes" (a client must present a certificate the CA signed) or
	// "optional".
	AuthClients string
	// CA signs the server's certificate (a new one when nil).
	CA *CA
}

// StartTLS runs a fresh redis-server that serves TLS only (--port 0
// --tls-port), with a certificate from a throwaway CA, and stops it when
// the test ends. Its TLS() files name the CA and a client certificate it
// signed; Do speaks TLS to it.
func StartTLS(t testing.TB, opts TLSOptions) *Server {
	t.Helper()
	requireRedis(t)
	if opts.CA == nil {
		opts.CA = NewCA(t, "edge test CA")
	}
	if opts.AuthClients == "" {
		opts.AuthClients = "no"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, Port: freePort(t, ln), dir: t.TempDir()}
	s.extra = tlsArgs(opts.CA, s.Port, opts.AuthClients)
	s.files = clientFiles(opts.CA)
	s.tls = clientConfig(t, s.files)
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// tlsArgs are the arguments of a redis-server serving TLS on port with a
// server certificate ca issues.
func tlsArgs(ca *CA, port int, authClients string) []string {
	cert, key := ca.Issue("redis-server-"+strconv.Itoa(port), false)
	return []string{"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca.File,
		"--tls-auth-clients", authClients}
}

// clientFiles issues a client certificate (once per CA).
func clientFiles(ca *CA) TLSFiles {
	cert := filepath.Join(ca.dir, "edge-client.pem")
	key := filepath.Join(ca.dir, "edge-client.key")
	if _, err := os.Stat(cert); err != nil {
		cert, key = ca.Issue("edge-client", true)
	}
	return TLSFiles{CAFile: ca.File, CertFile: cert, KeyFile: key}
}

// clientConfig is the tls.Config of f, for Do.
func clientConfig(t testing.TB, f TLSFiles) *tls.Config {
	t.Helper()
	pemCA, err := os.ReadFile(f.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}
