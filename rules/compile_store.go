package rules

import (
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// The store block's Redis connection attributes: TLS files, credentials
// from the environment, the dial budget (docs/policy.md, "store";
// docs/deploying.md, "Redis over TLS, ACLs and Sentinel").

// maxDialTimeout bounds dial_timeout: establishing a connection happens
// at start and after an outage, off the steady request path, but a
// caller that must dial waits for it.
const maxDialTimeout = 30 * time.Second

// envName is a POSIX environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

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
func (c *Compiler) clientCert(a clientCertAttrs) (cc clientCert) {
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

// storeAttr is an attribute of a store block: whether it is set, and
// where.
type storeAttr struct {
	set  bool
	name string
	rng  hcl.Range
}

// refuseAttrs refuses each of attrs that is set, "Unexpected NAME", with
// why (a format of the name) as the detail.
func (c *Compiler) refuseAttrs(attrs []storeAttr, why string) {
	for _, a := range attrs {
		if a.set {
			c.Errorf(a.rng, "Unexpected "+a.name, why, a.name)
		}
	}
}

// memoryStoreAttrs refuses the Redis-only attributes on a memory store.
func (c *Compiler) memoryStoreAttrs(b *storeBlock) {
	c.refuseAttrs([]storeAttr{
		{b.DialTimeout != nil, "dial_timeout", b.DialTimeoutRange},
		{b.CAFile != nil, "ca_file", b.CAFileRange},
		{b.CertFile != nil, "cert_file", b.CertFileRange},
		{b.KeyFile != nil, "key_file", b.KeyFileRange},
		{b.ServerName != nil, "server_name", b.ServerNameRange},
		{b.PasswordEnv != nil, "password_env", b.PasswordEnvRange},
		{b.SentinelUsername != nil, "sentinel_username", b.SentinelUsernameRange},
		{b.SentinelPasswordEnv != nil, "sentinel_password_env", b.SentinelPasswordEnvRange},
	}, "%s configures the connection to Redis; the memory store has none")
	c.refuseAttrs([]storeAttr{
		{b.ResetGrace != nil, "reset_grace", b.ResetGraceRange},
	}, "%s is for a Redis that comes back without its data; the memory store's counters live in the node (a restart reads its snapshot)")
}

// redisStoreAttrs compiles the Redis connection attributes into sc. Files
// are read and checked now (resolved against the policy file's
// directory), so that a missing CA or a key that does not match its
// certificate is a validate error, not a node that cannot reach Redis.
func (c *Compiler) redisStoreAttrs(b *storeBlock, sc *StoreConfig) {
	c.redisDurations(b, sc)
	c.redisTLS(b, sc)
	c.redisCredentials(b, sc)
}

// storeURL is b's url, or "" when it has none.
func storeURL(b *storeBlock) string {
	if b.URL == nil {
		return ""
	}
	return *b.URL
}

// redisDurations compiles dial_timeout (at most maxDialTimeout) and
// reset_grace (at most MaxResetGrace).
func (c *Compiler) redisDurations(b *storeBlock, sc *StoreConfig) {
	if b.DialTimeout != nil {
		d, err := ParseDuration(*b.DialTimeout)
		switch {
		case err != nil || d <= 0:
			c.Errorf(b.DialTimeoutRange, "Invalid dial_timeout", "%q is not a positive duration such as \"1s\"", *b.DialTimeout)
		case d > maxDialTimeout:
			c.Errorf(b.DialTimeoutRange, "Invalid dial_timeout", "%q: at most %v", *b.DialTimeout, maxDialTimeout)
		default:
			sc.DialTimeout = d
		}
	}
	if b.ResetGrace != nil {
		d, err := ParseDuration(*b.ResetGrace)
		switch {
		case err != nil || d < 0:
			c.Errorf(b.ResetGraceRange, "Invalid reset_grace", "%q is not a duration such as \"5m\" (\"0s\": none)", *b.ResetGrace)
		case d > MaxResetGrace:
			c.Errorf(b.ResetGraceRange, "Invalid reset_grace", "%q: at most %v (every sensitive rule that fails closed refuses meanwhile)", *b.ResetGrace, MaxResetGrace)
		default:
			sc.ResetGrace = d
		}
	}
}

// needTLS reports whether TLS attribute a is set, after refusing it when
// b's url names Redis without TLS.
func (c *Compiler) needTLS(b *storeBlock, a storeAttr) bool {
	url := storeURL(b)
	useTLS := strings.HasPrefix(url, "rediss://") || strings.HasPrefix(url, "rediss+sentinel://")
	if a.set && !useTLS && url != "" {
		c.Errorf(a.rng, "Unexpected "+a.name, "%s configures TLS; the url %q is not rediss:// or rediss+sentinel://", a.name, RedactURL(url))
		return false
	}
	return a.set
}

// redisTLS compiles server_name and ca_file, then the client certificate
// (redisClientCert).
func (c *Compiler) redisTLS(b *storeBlock, sc *StoreConfig) {
	if c.needTLS(b, storeAttr{b.ServerName != nil, "server_name", b.ServerNameRange}) {
		name := strings.TrimSuffix(strings.ToLower(*b.ServerName), ".")
		if err := checkServerName(name); err != nil {
			c.Errorf(b.ServerNameRange, "Invalid server_name", "%q %v", *b.ServerName, err)
		}
		sc.ServerName = name
	}
	if c.needTLS(b, storeAttr{b.CAFile != nil, "ca_file", b.CAFileRange}) {
		sc.CAFile = c.policyRelative(*b.CAFile)
		if pemBytes, err := readPEMFile(sc.CAFile); err != nil {
			c.Errorf(b.CAFileRange, "Cannot read ca_file", "%v (paths are relative to the policy file's directory)", err)
		} else if _, expired, err := caPool(pemBytes, time.Now()); err != nil {
			c.Errorf(b.CAFileRange, "Invalid ca_file", "%s: %v", sc.CAFile, err)
		} else {
			for _, x := range expired {
				c.Warnf(b.CAFileRange, "Expired CA certificate", "%s: %s; no chain can end in it", sc.CAFile, x)
			}
		}
	}
	c.redisClientCert(b, sc)
}

// redisClientCert compiles cert_file and key_file (clientCert), each a
// TLS attribute (needTLS).
func (c *Compiler) redisClientCert(b *storeBlock, sc *StoreConfig) {
	a := clientCertAttrs{certRange: b.CertFileRange, keyRange: b.KeyFileRange,
		readHint: " (paths are relative to the policy file's directory)", refuser: "a Redis that checks client certificates"}
	if c.needTLS(b, storeAttr{b.CertFile != nil, "cert_file", b.CertFileRange}) {
		a.cert = b.CertFile
	}
	if c.needTLS(b, storeAttr{b.KeyFile != nil, "key_file", b.KeyFileRange}) {
		a.key = b.KeyFile
	}
	cc := c.clientCert(a)
	sc.CertFile, sc.KeyFile = cc.certFile, cc.keyFile
}

// redisCredentials compiles password_env and the sentinel credentials
// (sentinel_username, sentinel_password_env; only with a sentinel url):
// names of environment variables, which are read where the store is
// opened (cmd/edge), not here.
func (c *Compiler) redisCredentials(b *storeBlock, sc *StoreConfig) {
	url := storeURL(b)
	env := func(p *string, name string, rng hcl.Range) string {
		if p == nil {
			return ""
		}
		if !envName.MatchString(*p) {
			// Not echoed: a secret pasted here must not reach the logs.
			c.Errorf(rng, "Invalid "+name, "not an environment variable name (letters, digits and '_', not starting with a digit; the value is not shown, in case it is a secret): %s names the variable that holds the secret", name)
		}
		return *p
	}
	sc.PasswordEnv = env(b.PasswordEnv, "password_env", b.PasswordEnvRange)
	if (b.SentinelUsername != nil || b.SentinelPasswordEnv != nil) && !strings.Contains(url, "+sentinel://") && url != "" {
		rng := b.SentinelUsernameRange
		if b.SentinelUsername == nil {
			rng = b.SentinelPasswordEnvRange
		}
		c.Errorf(rng, "Unexpected sentinel credentials", "sentinel_username and sentinel_password_env authenticate to sentinels; the url %q is not redis+sentinel:// or rediss+sentinel://", RedactURL(url))
	}
	if b.SentinelUsername != nil {
		sc.SentinelUsername = *b.SentinelUsername
	}
	sc.SentinelPasswordEnv = env(b.SentinelPasswordEnv, "sentinel_password_env", b.SentinelPasswordEnvRange)
}
