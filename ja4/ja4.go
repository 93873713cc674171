// Package ja4 computes the JA4 fingerprint of a TLS ClientHello. Owner: the
// JA4 work (issue 14, item 2); this is the contract the TLS listener uses.
package ja4

import "net"

// Conn records the first bytes a client sends on a connection (its
// ClientHello) so that its JA4 fingerprint can be computed once the TLS
// handshake has read them.
type Conn struct {
	net.Conn
}

// NewConn wraps a freshly accepted TCP connection, before tls.Server.
func NewConn(c net.Conn) *Conn { return &Conn{Conn: c} }

// Fingerprint returns the connection's JA4 fingerprint ("t13d1516h2_…"),
// computed once from the recorded ClientHello; nil if none was recorded or
// it could not be parsed.
func (c *Conn) Fingerprint() []byte { return nil }
