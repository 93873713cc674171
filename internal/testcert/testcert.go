// Package testcert makes throwaway certificates for tests: a CA generated
// in the test (ECDSA P-256, crypto/x509) and the server or client
// certificates it signs (by default servers for 127.0.0.1, ::1 and
// localhost). Nothing here is ever a committed key; nothing outside tests
// imports it. It is the one CA of the repo's tests: internal/testredis
// builds its CA files on it.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	// PEM is Cert in PEM, for a client's CA file (curl --cacert).
	PEM []byte
	key *ecdsa.PrivateKey
}

// Spec describes a certificate; its zero fields are the defaults.
type Spec struct {
	// CN is the subject's common name.
	CN string
	// NotBefore and NotAfter bound its validity; zero: from an hour ago
	// for a day.
	NotBefore, NotAfter time.Time
	// Client makes a leaf for client authentication (ExtKeyUsageClientAuth)
	// instead of a server's (ExtKeyUsageServerAuth).
	Client bool
	// Names are a leaf's subject alternative names: DNS names, or IP
	// addresses when they parse as one. None: a server's are localhost,
	// 127.0.0.1 and ::1, a client's are none.
	Names []string
}

// template is the certificate's serial number (random), subject and
// validity.
func (s Spec) template(t testing.TB) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: s.CN}, NotBefore: s.NotBefore, NotAfter: s.NotAfter}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	return tmpl
}

// NewCA makes a CA named after the test, valid from an hour ago for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	return NewCASpec(t, Spec{CN: "edge test CA " + t.Name()})
}

// NewCASpec makes a CA of spec's CN and validity (its Client and Names do
// not apply to a CA).
func NewCASpec(t testing.TB, spec Spec) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := spec.template(t)
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	cert, certPEM := create(t, tmpl, tmpl, key, key)
	return &CA{Cert: cert, PEM: certPEM, key: key}
}

// Pool is a pool holding only the CA, for a client's RootCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is a certificate the CA issued, with its key (PKCS #8), in PEM.
type Leaf struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// Issue makes a server certificate named cn (its subject's common name),
// valid from an hour ago for a day, for 127.0.0.1, ::1 and localhost.
func (ca *CA) Issue(t testing.TB, cn string) Leaf {
	t.Helper()
	return ca.IssueSpec(t, Spec{CN: cn})
}

// IssueValid is Issue with a validity period of its own (an expired or not
// yet valid certificate).
func (ca *CA) IssueValid(t testing.TB, cn string, notBefore, notAfter time.Time) Leaf {
	t.Helper()
	return ca.IssueSpec(t, Spec{CN: cn, NotBefore: notBefore, NotAfter: notAfter})
}

// IssueSpec makes the leaf spec describes, signed by the CA.
func (ca *CA) IssueSpec(t testing.TB, spec Spec) Leaf {
	t.Helper()
	key := newKey(t)
	tmpl := spec.template(t)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	names := spec.Names
	if spec.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else if len(names) == 0 {
		names = []string{"localhost", "127.0.0.1", "::1"}
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	cert, certPEM := create(t, tmpl, ca.Cert, key, ca.key)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Leaf{Cert: cert, CertPEM: certPEM, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// create signs tmpl, for key's public half, by parent's signer, and returns
// the certificate parsed and in PEM.
func create(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TLS is the leaf as a tls.Certificate, for a Go server's or client's
// Certificates.
func (l Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// Write writes the leaf's certificate and key to certFile and keyFile (the
// key mode 0600).
func (l Leaf) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	if err := os.WriteFile(certFile, l.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, l.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}
