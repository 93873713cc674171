package node

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// tlsBlock is `edge { tls { cert_file = "...", key_file = "..." } }`: the
// public listener serves TLS with this certificate (docs/policy.md,
// "edge { }"; docs/deploying.md, "TLS on the public listener").
type tlsBlock struct {
	// CertFile is the PEM certificate chain, the leaf first (as certbot's
	// fullchain.pem and a Kubernetes TLS secret's tls.crt hold it).
	CertFile string `hcl:"cert_file"`
	// KeyFile is the leaf's PEM private key (PKCS #1, PKCS #8 or SEC 1).
	KeyFile string `hcl:"key_file"`

	DefRange      hcl.Range `hcl:",def_range"`
	CertFileRange hcl.Range `hcl:"cert_file,attr_value_range"`
	KeyFileRange  hcl.Range `hcl:"key_file,attr_value_range"`
}

// ListenerTLS is the compiled tls block: the public listener's certificate
// as compile read and checked it, so that the node installs exactly what
// `edge validate` or the reload accepted (gateway serves Certificate from
// the policy's install on; a certificate reload, LoadListenerTLS, may
// serve a newer pair from the same files before the next policy reload).
type ListenerTLS struct {
	// CertFile and KeyFile are the block's paths resolved against the
	// policy file's directory.
	CertFile, KeyFile string
	// Certificate is the loaded pair, its Leaf parsed; never nil.
	Certificate *tls.Certificate
	// Digest is the SHA-256 of the two files' contents as compile read
	// them (certificate, then key): what the node serves, for telling a
	// change on disk from the same bytes rewritten.
	Digest [sha256.Size]byte
}

// edgeTLS compiles the tls block. The pair is read now, so that a missing,
// unreadable or mismatched pair, or a leaf outside its validity period, is
// an error at its attribute: `edge validate` fails, a node does not start,
// and a reload is refused while the running certificate keeps serving.
//
// An expired or not yet valid leaf is an error, not a warning: a node that
// serves it fails every client that verifies, so at start the mistake
// shows at once instead of as handshake failures in the clients' logs,
// and at a reload (a renewal tool that wrote back an old file, a clock
// that is wrong) refusing keeps the certificate that works. The price: a
// node whose certificate on disk has expired takes no rule change either
// until the certificate is renewed, which is the outage to fix first.
func (c *compiler) edgeTLS(e *edgeBlock) {
	b := e.TLS
	if b == nil {
		return
	}
	dir := filepath.Dir(c.Policy().Filename)
	certPath, keyPath := resolvePath(dir, b.CertFile), resolvePath(dir, b.KeyFile)
	certPEM, certOK := c.readTLSFile(certPath, b.CertFile, b.CertFileRange, "cert_file")
	keyPEM, keyOK := c.readTLSFile(keyPath, b.KeyFile, b.KeyFileRange, "key_file")
	if !certOK || !keyOK {
		return
	}
	if hasPEMBlock(certPEM, "CERTIFICATE") && hasPEMBlock(certPEM, "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY") {
		// tls.X509KeyPair would take it; a key in the certificate file is
		// a key copied where it will be handed around as public.
		c.Warnf(b.CertFileRange, "Private key in cert_file", "%s also holds a private key: keep it in key_file only", certPath)
	}
	cert, bad := loadPair(certPath, keyPath, certPEM, keyPEM, time.Now())
	if bad != nil {
		rng := b.CertFileRange
		if bad.attr == "key_file" {
			rng = b.KeyFileRange
		}
		c.Errorf(rng, bad.summary, "%s", bad.detail)
		return
	}
	c.cfg.TLS = newListenerTLS(certPath, keyPath, certPEM, keyPEM, cert)
}

// newListenerTLS is the ListenerTLS of a loaded pair, with the digest of
// the bytes it was loaded from.
func newListenerTLS(certPath, keyPath string, certPEM, keyPEM []byte, cert *tls.Certificate) *ListenerTLS {
	h := sha256.New()
	h.Write(certPEM)
	h.Write(keyPEM)
	t := &ListenerTLS{CertFile: certPath, KeyFile: keyPath, Certificate: cert}
	h.Sum(t.Digest[:0])
	return t
}

// pairProblem is why a certificate and key pair does not load: attr is
// the attribute at fault ("cert_file" or "key_file"), summary and detail
// are a diagnostic's.
type pairProblem struct{ attr, summary, detail string }

func (p *pairProblem) Error() string { return p.attr + ": " + p.summary + "; " + p.detail }

// loadPair loads the PEM pair read from certPath and keyPath and checks it
// as edgeTLS documents (a certificate block, a key that is the
// certificate's, a leaf valid at now), for compile and LoadListenerTLS
// alike: what a reload refuses, a certificate reload refuses too.
func loadPair(certPath, keyPath string, certPEM, keyPEM []byte, now time.Time) (*tls.Certificate, *pairProblem) {
	if !hasPEMBlock(certPEM, "CERTIFICATE") {
		return nil, &pairProblem{"cert_file", "Invalid certificate", fmt.Sprintf("%s holds no PEM \"CERTIFICATE\" block: cert_file is the PEM certificate chain, the leaf first", certPath)}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if certErr := checkCertPEM(certPEM); certErr != nil {
			return nil, &pairProblem{"cert_file", "Invalid certificate", fmt.Sprintf("%s: %v", certPath, certErr)}
		}
		// The certificate parses: the key is the culprit (not a key,
		// or not the certificate's).
		return nil, &pairProblem{"key_file", "Invalid key pair", fmt.Sprintf("%s with the certificate %s: %v", keyPath, certPath, err)}
	}
	leaf := cert.Leaf
	if leaf == nil { // X509KeyPair fills it in since Go 1.23; be safe
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, &pairProblem{"cert_file", "Invalid certificate", fmt.Sprintf("%s: %v", certPath, err)}
		}
		cert.Leaf = leaf
	}
	switch {
	case now.After(leaf.NotAfter):
		return nil, &pairProblem{"cert_file", "Certificate expired", fmt.Sprintf("%s (%s) expired at %s; every client that verifies would refuse it", certPath, leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339))}
	case now.Before(leaf.NotBefore):
		return nil, &pairProblem{"cert_file", "Certificate not yet valid", fmt.Sprintf("%s (%s) is valid from %s (is this node's clock right?); every client that verifies would refuse it", certPath, leaf.Subject, leaf.NotBefore.UTC().Format(time.RFC3339))}
	}
	return &cert, nil
}

// LoadListenerTLS reads and checks the pair at certPath and keyPath (paths
// as ListenerTLS holds them, already resolved) exactly as compile checks a
// tls block's, with the leaf's validity judged at now, and returns it with
// the digest of the bytes read. It is the certificate reload's, which
// follows the files of the policy in force without reloading the policy
// (docs/operations.md, "Certificates"), so that a broken policy file
// cannot hold back a renewed certificate. The error names the attribute
// at fault, its summary and detail ("key_file: Invalid key pair; ...").
func LoadListenerTLS(certPath, keyPath string, now time.Time) (*ListenerTLS, error) {
	certPEM, err := readPEMFile(certPath)
	if err == nil && len(certPEM) == 0 {
		err = fmt.Errorf("%s is empty", certPath)
	}
	if err != nil {
		return nil, fmt.Errorf("cert_file: %w", err)
	}
	keyPEM, err := readPEMFile(keyPath)
	if err == nil && len(keyPEM) == 0 {
		err = fmt.Errorf("%s is empty", keyPath)
	}
	if err != nil {
		return nil, fmt.Errorf("key_file: %w", err)
	}
	cert, bad := loadPair(certPath, keyPath, certPEM, keyPEM, now)
	if bad != nil {
		return nil, bad
	}
	return newListenerTLS(certPath, keyPath, certPEM, keyPEM, cert), nil
}

// resolvePath resolves a path of the policy against dir, the policy file's
// directory (docs/policy.md: paths are relative to the policy file).
func resolvePath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// readTLSFile reads one file of the pair, with an error at rng if it
// cannot.
func (c *compiler) readTLSFile(path, written string, rng hcl.Range, attr string) ([]byte, bool) {
	if written == "" {
		c.Errorf(rng, "Invalid "+attr, "%s is empty: it names a PEM file, relative to the policy file's directory", attr)
		return nil, false
	}
	b, err := readPEMFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Errorf(rng, "Missing "+attr, "%s does not exist (paths are relative to the policy file's directory)", path)
		return nil, false
	case err != nil:
		c.Errorf(rng, "Unreadable "+attr, "%v", err)
		return nil, false
	case len(b) == 0:
		c.Errorf(rng, "Invalid "+attr, "%s is empty", path)
		return nil, false
	}
	return b, true
}

// hasPEMBlock reports whether data holds a PEM block of one of the types.
func hasPEMBlock(data []byte, types ...string) bool {
	for {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			return false
		}
		for _, t := range types {
			if blk.Type == t {
				return true
			}
		}
	}
}

// checkCertPEM parses every certificate of a PEM chain, so that a broken
// certificate is reported at cert_file rather than as a bad pair.
func checkCertPEM(data []byte) error {
	n := 0
	for {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		n++
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("certificate %d of the chain: %w", n, err)
		}
	}
	return nil
}
