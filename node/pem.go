package node

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// The files a policy names (the tls, upstream_tls and store blocks' PEM
// files, resolved against the policy file's directory), the CA bundles
// and client certificates in them, and the server names TLS checks.

// maxPEMFile bounds a PEM file a policy names (the tls, upstream_tls and
// store blocks): a CA bundle of a few hundred certificates is well under it.
const maxPEMFile = 1 << 20

// readPEMFile reads a regular file of at most maxPEMFile bytes, so that a
// path such as /dev/zero or a FIFO is an error, not a compile that never
// ends.
func readPEMFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEMFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a PEM file", path, maxPEMFile)
	}
	return b, nil
}

// clientCertAttrs are a block's cert_file and key_file, the client
// certificate the edge presents (to Redis: the store block; to the origin:
// upstream_tls).
type clientCertAttrs struct {
	cert, key           *string // nil: unset
	certRange, keyRange hcl.Range
	// readHint follows a read error's detail; refuser, in an expired
	// certificate's warning, is who will refuse the edge.
	readHint, refuser string
}

// clientCert is a compiled client certificate: its files resolved against
// the policy file's directory (both "" unless both are set), and, when
// usable, their PEM bytes and the pair.
type clientCert struct {
	certFile, keyFile string
	certPEM, keyPEM   []byte
	pair              *tls.Certificate
}

// clientCert compiles a cert_file and key_file, which come together: both
// are read, and the key must be the certificate's private key; an expired
// certificate is a warning. It reports each reason the pair cannot be
// used, which leaves cc.pair nil.
func (c *compiler) clientCert(a clientCertAttrs) (cc clientCert) {
	switch {
	case a.cert != nil && a.key == nil:
		c.Errorf(a.certRange, "Missing key_file", "cert_file needs key_file, the private key of its certificate")
		return cc
	case a.key != nil && a.cert == nil:
		c.Errorf(a.keyRange, "Missing cert_file", "key_file needs cert_file, the certificate of its key")
		return cc
	case a.cert == nil:
		return cc
	}
	cc.certFile, cc.keyFile = c.policyRelative(*a.cert), c.policyRelative(*a.key)
	certPEM, cerr := readPEMFile(cc.certFile)
	if cerr != nil {
		c.Errorf(a.certRange, "Cannot read cert_file", "%v%s", cerr, a.readHint)
	}
	keyPEM, kerr := readPEMFile(cc.keyFile)
	if kerr != nil {
		c.Errorf(a.keyRange, "Cannot read key_file", "%v%s", kerr, a.readHint)
	}
	if cerr != nil || kerr != nil {
		return cc
	}
	leaf, err := firstCertificate(certPEM)
	if err != nil {
		c.Errorf(a.certRange, "Invalid cert_file", "%s: %v", cc.certFile, err)
		return cc
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		c.Errorf(a.keyRange, "Invalid key_file", "%s does not hold the private key of %s: %v", cc.keyFile, cc.certFile, err)
		return cc
	}
	if now := time.Now(); now.After(leaf.NotAfter) {
		c.Warnf(a.certRange, "Expired cert_file", "%s expired at %s: %s will refuse the edge", cc.certFile, leaf.NotAfter.UTC().Format(time.RFC3339), a.refuser)
	}
	cc.certPEM, cc.keyPEM, cc.pair = certPEM, keyPEM, &pair
	return cc
}

// caFile compiles a ca_file: path resolved against the policy file's
// directory (file), read and parsed as a CA bundle (caPool); a
// certificate in it that has expired is a warning. readHint follows a
// read error's detail. pool is nil when the bundle cannot be used, each
// reason reported.
func (c *compiler) caFile(path string, rng hcl.Range, readHint string) (file string, pemBytes []byte, pool *x509.CertPool) {
	file = c.policyRelative(path)
	pemBytes, err := readPEMFile(file)
	if err != nil {
		c.Errorf(rng, "Cannot read ca_file", "%v%s", err, readHint)
		return file, nil, nil
	}
	pool, expired, err := caPool(pemBytes, time.Now())
	if err != nil {
		c.Errorf(rng, "Invalid ca_file", "%s: %v", file, err)
		return file, nil, nil
	}
	for _, x := range expired {
		c.Warnf(rng, "Expired CA certificate", "%s: %s; no chain can end in it", file, x)
	}
	return file, pemBytes, pool
}

// serverName compiles a server_name: v lowercased, without a final dot,
// and checked (checkServerName).
func (c *compiler) serverName(v string, rng hcl.Range) string {
	name := strings.TrimSuffix(strings.ToLower(v), ".")
	if err := checkServerName(name); err != nil {
		c.Errorf(rng, "Invalid server_name", "%q %v", v, err)
	}
	return name
}

// policyRelative resolves a path of the policy against the policy file's
// directory; an absolute path stays as it is.
func (c *compiler) policyRelative(path string) string {
	if filepath.IsAbs(path) || path == "" {
		return path
	}
	return filepath.Join(filepath.Dir(c.Policy().Filename), path)
}

// caPool parses a PEM file of CA certificates: every block must be a
// CERTIFICATE that parses, and there must be one at least (x509's
// AppendCertsFromPEM skips what it cannot read, so a key pasted into the
// file or a truncated block would pass unseen). expired describes the
// certificates past their NotAfter at now (a warning: a bundle may carry
// an old root beside the current one).
func caPool(pemBytes []byte, now time.Time) (pool *x509.CertPool, expired []string, err error) {
	pool = x509.NewCertPool()
	n := 0
	for rest := pemBytes; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			if strings.TrimSpace(string(rest)) != "" {
				return nil, nil, errors.New("text that is not a PEM block")
			}
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, nil, fmt.Errorf("a %s block; want only CERTIFICATE blocks", blk.Type)
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("certificate %d: %v", n+1, err)
		}
		if now.After(cert.NotAfter) {
			expired = append(expired, fmt.Sprintf("certificate %d (%s) expired at %s", n+1, cert.Subject, cert.NotAfter.UTC().Format(time.RFC3339)))
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, nil, errors.New("no PEM certificate")
	}
	return pool, expired, nil
}

// firstCertificate parses the first CERTIFICATE block of a cert_file.
func firstCertificate(pemBytes []byte) (*x509.Certificate, error) {
	for rest := pemBytes; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return nil, errors.New("no PEM certificate")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// checkServerName accepts an IP address or a DNS name (letters, digits,
// hyphens and dots, labels of 1 to 63 bytes, at most 253 in all).
func checkServerName(name string) error {
	if net.ParseIP(name) != nil {
		return nil
	}
	if name == "" || len(name) > 253 {
		return errors.New("is not a host name")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("is not a host name (no port, scheme or path)")
		}
		for i := 0; i < len(label); i++ {
			ch := label[i]
			if !('a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-') {
				return errors.New("is not a host name (no port, scheme or path)")
			}
		}
	}
	return nil
}
