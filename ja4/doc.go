// Package ja4 computes the JA4 fingerprint of a TLS ClientHello (FoxIO's
// open JA4 method, BSD 3-Clause; technical_details/JA4.md of
// github.com/FoxIO-LLC/ja4), and records the ClientHello a connection
// sends so that the edge can fingerprint the connections it terminates
// (docs/deploying.md, "JA4 fingerprints").
//
// A fingerprint is 36 bytes of ASCII, "t13d1516h2_8daaf6152771_e5627efa2ab1":
//
//	a  protocol ('t': TLS over TCP), TLS version ("13", "12", … "00"),
//	   'd' with an SNI extension or 'i' without, the cipher and extension
//	   counts (two digits each, GREASE excluded, at most 99), the first and
//	   last characters of the first ALPN value ("00" without one)
//	b  the first 12 hex digits of SHA-256 over the sorted cipher suites
//	c  the same over the sorted extensions without SNI and ALPN, then "_"
//	   and the signature algorithms in the order sent
//
// Append computes it from a ClientHello handshake message, Records from
// the TLS records that carry one. Conn wraps a server-side connection
// before crypto/tls reads it and keeps at most MaxRecord bytes of what the
// client sent, until the ClientHello is complete; its Fingerprint computes
// the JA4 once and drops the bytes. Only the first ClientHello counts: the
// second one a client sends after a HelloRetryRequest (RFC 8446 §4.1.4)
// is not recorded. Valid checks a fingerprint's shape, for
// one a trusted proxy forwards in a header. Feature is the ja4
// characteristic (docs/policy.md); Extension, the gateway's part (package
// gateway/ext): a Conn under each connection of the TLS listener, the
// request's fingerprint from it or a trusted proxy's ja4_header, and
// X-Edge-JA4 to the origin.
//
// Concurrency: Append, Records and Valid are pure and safe for concurrent
// use. A Conn's Read is called by one goroutine (crypto/tls); Fingerprint
// may be called from any goroutine at any time, concurrently with Read.
package ja4
