package botscore

import "github.com/edge-gateway/edge/ja4"

// The JA4 signal (docs/botscore.md, "JA4 signal"): a request whose
// User-Agent names a browser family but whose TLS fingerprint is not that
// family's. It judges only the fingerprint's stable parts, and only on
// positive evidence:
//
//   - the b part (the hash of the sorted cipher suites) of a common HTTP
//     library, whatever the browser named: libraries rarely copy a
//     browser's cipher list, and the hash does not move with extension
//     order, GREASE or the server's name;
//   - for Chrome and Firefox, whose cipher lists have been fixed for years,
//     a b part that is not theirs, or a version below TLS 1.3.
//
// The c part (extensions and signature algorithms) is never judged: it
// changes with browser releases, resumption and padding (Chromium 156 gave
// two values on two connections here). Safari has no profile (its cipher
// list is not in the data below), so only the library list applies to it.
// QUIC fingerprints ('q', from a proxy's header) are not judged: browsers
// offer only TLS 1.3's three suites there. A fingerprint that is not of
// JA4's shape, or absent, fits.
//
// Sources, each hash measured or published, never guessed:
//
//	8daaf6152771  Chrome, Edge (Chromium)   FoxIO JA4 vectors (tls-sni.pcapng,
//	                                        browsers-x509.pcapng, latest.pcapng,
//	                                        tls3.pcapng); Chromium 156 measured
//	                                        here (TestJA4Chromium)
//	5b57614c22b0  Firefox                   FoxIO vector tls12.pcap (Firefox to
//	                                        contile.services.mozilla.com)
//	f57a46bbacb6  Go crypto/tls             Go 1.26's default client, measured
//	e8f1e7e78f70  curl / OpenSSL 3.0        curl 7.88.1, OpenSSL 3.0.19 (Debian 12)
//	85036bcba153  Python ssl / OpenSSL 3.0  Python 3.11 ssl.create_default_context

// ja4Family is a browser family's cipher-list hashes.
type ja4Family struct {
	browser Browser
	ciphers []string // JA4 b parts
}

var ja4Families = [...]ja4Family{
	{BrowserChrome, []string{"8daaf6152771"}},
	{BrowserFirefox, []string{"5b57614c22b0"}},
}

// ja4Libraries are HTTP libraries' cipher-list hashes (JA4 b parts).
var ja4Libraries = [...]string{
	"f57a46bbacb6", // Go crypto/tls
	"e8f1e7e78f70", // curl, OpenSSL 3.0
	"85036bcba153", // Python ssl, OpenSSL 3.0
}

// JA4Fits reports whether fp, a JA4 fingerprint, fits browser family b
// (see above): false only when the fingerprint is a library's, or not the
// family's own where the family has a profile. It allocates nothing.
func JA4Fits(b Browser, fp []byte) bool {
	if b == BrowserOther || !ja4.Valid(fp) || fp[0] != 't' {
		return true
	}
	ciphers := fp[11:23]
	for _, h := range ja4Libraries {
		if string(ciphers) == h {
			return false
		}
	}
	for _, f := range ja4Families {
		if f.browser != b {
			continue
		}
		if string(fp[1:3]) != "13" {
			return false
		}
		for _, h := range f.ciphers {
			if string(ciphers) == h {
				return true
			}
		}
		return false
	}
	return true
}
