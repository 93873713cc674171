package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
)

// TLS configures the TLS connections of a rediss:// or rediss+sentinel://
// store (docs/deploying.md, "Redis over TLS, ACLs and Sentinel"). The zero
// value verifies the server against the system's CA pool, under the URL's
// host name, and presents no client certificate.
type TLS struct {
	// CAFile is a PEM file of the CA certificates the server's chain must
	// lead to, instead of the system's pool (a managed service's own CA, a
	// private one).
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and its key,
	// both or neither, presented when the server asks for one (Redis'
	// tls-auth-clients yes or optional).
	CertFile, KeyFile string
	// ServerName is the name the server's certificate is verified under,
	// when it is not the host the URL (or, with Sentinel, the sentinel)
	// names: sentinels report the master by IP address.
	ServerName string
}

// set reports whether any field is set.
func (t TLS) set() bool { return t != TLS{} }

// Config loads t's files into a client tls.Config: TLS 1.2 at least, Go's
// default cipher suites, the CA pool of CAFile (nil, the system's, when
// empty) and the client certificate. Errors name the file, never its
// contents.
func (t TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redisstore: reading ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redisstore: ca_file %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("redisstore: loading cert_file and key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case t.CertFile != "" || t.KeyFile != "":
		return nil, errors.New("redisstore: cert_file and key_file go together")
	}
	return cfg, nil
}

// tlsConfig returns the tls.Config of a store whose URL asks for TLS
// (useTLS), or nil; TLS settings on a plain URL are an error, not ignored.
func tlsConfig(opts Options, useTLS bool) (*tls.Config, error) {
	if !useTLS {
		if opts.TLS.set() {
			return nil, errors.New("redisstore: TLS settings (ca_file, cert_file, key_file, server_name) need a rediss:// or rediss+sentinel:// URL")
		}
		return nil, nil
	}
	return opts.TLS.Config()
}

// IsAuthError reports whether err is Redis refusing the store's
// credentials or its ACL refusing a command: WRONGPASS, NOAUTH or NOPERM.
func IsAuthError(err error) bool {
	return redis.HasErrorPrefix(err, "WRONGPASS") || redis.HasErrorPrefix(err, "NOAUTH") || redis.HasErrorPrefix(err, "NOPERM")
}
