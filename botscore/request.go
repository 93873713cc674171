package botscore

import (
	"bytes"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// The request signals (docs/botscore.md, "Request signals"): what the
// User-Agent names (useragent.go), which of Accept, Accept-Language and
// Accept-Encoding the request carries, and whether its header block has
// the order and letter case of the browser its User-Agent names. HTTP/1.1
// keeps both as the client wrote them, and fasthttp's RawHeaders hands
// them over as received; HTTP libraries write their own order (Go's
// net/http: Host, User-Agent, the rest sorted, Accept-Encoding last, every
// name in canonical case; python-requests: User-Agent, Accept-Encoding,
// Accept, Connection), and rarely fake a browser's.
//
// The header profiles, for a top-level navigation and for fetch/XHR over
// HTTP/1.1 (plain HTTP to a host other than localhost drops Chrome's
// sec-ch-ua* and every browser's Sec-Fetch-*, which the profiles never
// require):
//
//	Chrome   Host, Connection, [Cache-Control], [sec-ch-ua, sec-ch-ua-mobile,
//	         sec-ch-ua-platform], [Upgrade-Insecure-Requests], User-Agent,
//	         Accept, [Sec-Fetch-Site, -Mode, -User, -Dest], [Referer],
//	         Accept-Encoding, Accept-Language, [Cookie]
//	         (fetch: sec-ch-ua-platform and the page's headers move around
//	         User-Agent; Accept-Encoding, Accept-Language stay last)
//	Firefox  Host, User-Agent, Accept, Accept-Language, Accept-Encoding,
//	         [Referer], [Origin], Connection, [Cookie],
//	         [Upgrade-Insecure-Requests], [Sec-Fetch-Dest, -Mode, -Site, -User],
//	         [Priority]
//	Safari   Host first; the rest in an order that varies between versions
//	         and requests, so only the case is judged
//
// The check is an order of a few pairs that every version keeps, not the
// full list, so a browser's extra or missing optional headers never fail
// it. It is a 45-point reason: on its own it leaves a browser-like request
// at 54, and takes it under 30 only with another signal (score.go).

// HeaderSource is what ReadRequest reads from a request.
type HeaderSource interface {
	// UserAgent returns the User-Agent header's value, or nil.
	UserAgent() []byte
	// RawHeaders returns the request's header lines as received, in order
	// and letter case, each ending in CRLF (or LF), without the request
	// line: fasthttp's RequestHeader.RawHeaders. Empty when unknown; then
	// the header order is not judged.
	RawHeaders() []byte
}

// HeaderGetter is an optional HeaderSource method: a header's value by
// name, case-insensitive. ReadRequest uses it for Accept, Accept-Language
// and Accept-Encoding when RawHeaders is empty.
type HeaderGetter interface {
	Header(name []byte) []byte
}

// ReadRequest fills sig from the request's User-Agent and header block.
// It allocates nothing (the first call compiles the crawler list).
func ReadRequest(h HeaderSource, sig *RequestSignals) {
	sig.UA, sig.Browser, sig.Claim = ClassifyUserAgent(h.UserAgent())
	var hb headerBlock
	raw := h.RawHeaders()
	hb.read(raw)
	sig.HasAccept, sig.HasAcceptLanguage, sig.HasAcceptEncoding = hb.value[hAccept], hb.value[hAcceptLanguage], hb.value[hAcceptEncoding]
	if len(raw) == 0 {
		if g, ok := h.(HeaderGetter); ok {
			sig.HasAccept = len(httpsyntax.TrimOWS(g.Header(nameAccept))) > 0
			sig.HasAcceptLanguage = len(httpsyntax.TrimOWS(g.Header(nameAcceptLanguage))) > 0
			sig.HasAcceptEncoding = len(httpsyntax.TrimOWS(g.Header(nameAcceptEncoding))) > 0
		}
	}
	sig.BrowserHeadersMissing, sig.HeaderOrderMismatch = false, false
	if sig.UA != UABrowser {
		return
	}
	// Every browser sends all three on every request, navigation or fetch.
	sig.BrowserHeadersMissing = !sig.HasAccept || !sig.HasAcceptLanguage || !sig.HasAcceptEncoding
	if len(raw) > 0 {
		sig.HeaderOrderMismatch = !hb.fits(sig.Browser)
	}
}

var (
	nameAccept         = []byte("Accept")
	nameAcceptLanguage = []byte("Accept-Language")
	nameAcceptEncoding = []byte("Accept-Encoding")
)

// The headers whose place the profiles judge.
const (
	hHost = iota
	hConnection
	hUserAgent
	hAccept
	hAcceptLanguage
	hAcceptEncoding
	hUpgradeInsecure
	hSecFetch // the first Sec-Fetch-*
	numHeaders
)

// canonical is each judged header's name as every browser writes it in
// HTTP/1.1, and (after numHeaders) other names browsers write in this
// case, judged for case only.
var canonical = [...]string{
	hHost:            "Host",
	hConnection:      "Connection",
	hUserAgent:       "User-Agent",
	hAccept:          "Accept",
	hAcceptLanguage:  "Accept-Language",
	hAcceptEncoding:  "Accept-Encoding",
	hUpgradeInsecure: "Upgrade-Insecure-Requests",
	hSecFetch:        "", // by prefix
	numHeaders:       "Referer",
	numHeaders + 1:   "Cookie",
	numHeaders + 2:   "Origin",
	numHeaders + 3:   "Cache-Control",
	numHeaders + 4:   "Content-Type",
	numHeaders + 5:   "Content-Length",
}

// headerBlock is what one pass over the header lines found.
type headerBlock struct {
	pos     [numHeaders]int16 // line index of the first occurrence, -1 absent
	value   [numHeaders]bool  // present with a non-empty value
	badCase bool              // a known name in a case browsers never write
}

func (hb *headerBlock) read(raw []byte) {
	for i := range hb.pos {
		hb.pos[i] = -1
	}
	line := int16(0)
	for len(raw) > 0 {
		end := bytes.IndexByte(raw, '\n')
		var l []byte
		if end < 0 {
			l, raw = raw, nil
		} else {
			l, raw = raw[:end], raw[end+1:]
		}
		if len(l) > 0 && l[len(l)-1] == '\r' {
			l = l[:len(l)-1]
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 || l[0] == ' ' || l[0] == '\t' {
			continue // a blank line, an obsolete continuation, or no name
		}
		name, val := l[:colon], httpsyntax.TrimOWS(l[colon+1:])
		hb.note(name, len(val) > 0, line)
		if line < 1<<14 {
			line++
		}
	}
}

func (hb *headerBlock) note(name []byte, hasValue bool, line int16) {
	switch {
	case hasFoldPrefix(name, "sec-ch-ua"):
		// Chrome writes its client hints in lower case; Go's net/http
		// canonicalises them to Sec-Ch-Ua.
		if !isLower(name) {
			hb.badCase = true
		}
		return
	case hasFoldPrefix(name, "sec-fetch-"):
		if !isTitle(name) {
			hb.badCase = true
		}
		if hb.pos[hSecFetch] < 0 {
			hb.pos[hSecFetch] = line
		}
		return
	}
	for i, c := range canonical {
		if c == "" || !foldEqual(name, c) {
			continue
		}
		if string(name) != c {
			hb.badCase = true
		}
		if i < numHeaders {
			if hb.pos[i] < 0 {
				hb.pos[i] = line
			}
			hb.value[i] = hb.value[i] || hasValue
		}
		return
	}
}

// fits reports whether the block is in an order and case browser b sends.
func (hb *headerBlock) fits(b Browser) bool {
	if b == BrowserOther {
		return true
	}
	if hb.badCase {
		return false
	}
	p := &hb.pos
	// before: x comes before y, when both are present.
	before := func(x, y int) bool { return p[x] < 0 || p[y] < 0 || p[x] < p[y] }
	switch b {
	case BrowserChrome:
		// Chromium's HTTP/1.1 stream writes Host and Connection first, and
		// its network stack appends Accept-Encoding, then Accept-Language,
		// after the headers the loader and the page set.
		return (p[hHost] <= 0) && p[hConnection] >= 0 &&
			before(hConnection, hUserAgent) &&
			before(hUserAgent, hAcceptEncoding) && before(hAccept, hAcceptEncoding) &&
			before(hUserAgent, hAcceptLanguage) && before(hAccept, hAcceptLanguage) &&
			before(hAcceptEncoding, hAcceptLanguage)
	case BrowserFirefox:
		return (p[hHost] <= 0) && p[hConnection] >= 0 &&
			before(hUserAgent, hAccept) && before(hAccept, hAcceptLanguage) &&
			before(hAcceptLanguage, hAcceptEncoding) &&
			before(hAcceptEncoding, hConnection) &&
			before(hAcceptEncoding, hUpgradeInsecure) && before(hAcceptEncoding, hSecFetch)
	}
	return true // Safari: the case alone
}

// foldEqual reports whether b equals s up to ASCII case.
func foldEqual(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func hasFoldPrefix(b []byte, lowerPrefix string) bool {
	return len(b) >= len(lowerPrefix) && foldEqual(b[:len(lowerPrefix)], lowerPrefix)
}

func isLower(b []byte) bool {
	for _, c := range b {
		if c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}

// isTitle reports whether every dash-separated word starts upper-case and
// goes on lower-case (Sec-Fetch-Site).
func isTitle(b []byte) bool {
	start := true
	for _, c := range b {
		switch {
		case c == '-':
			start = true
			continue
		case start && c >= 'a' && c <= 'z', !start && c >= 'A' && c <= 'Z':
			return false
		}
		start = false
	}
	return true
}
