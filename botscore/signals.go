package botscore

// The signals Score reads: what the network (network.go, MaxMind
// databases and lists) and the request (request.go, its user agent and
// headers) say about a client. Both readers fill caller-owned structs and
// allocate nothing.

// NetSignals is what the network says about the client address.
type NetSignals struct {
	// ASN is the autonomous system number (0: unknown).
	ASN uint32
	// Country is the ISO 3166-1 alpha-2 country code, or "" when unknown.
	// It points into the database's memory or a constant: do not modify.
	Country string
	// Hosting: the ASN is in hosting_asns, or the anonymous-IP database
	// flags the address as a hosting provider.
	Hosting bool
	// VPN, Tor, ResidentialProxy: the anonymous-IP database's flags (a
	// record found with no flag set flags nothing).
	VPN, Tor, ResidentialProxy bool
	// VerifiedClaim: the request claims a crawler (RequestSignals.Claim)
	// and the client is in that crawler operator's published ranges.
	VerifiedClaim bool
}

// UAKind is what the User-Agent names.
type UAKind uint8

const (
	// UABrowser: a mainstream browser (Chrome, Firefox, Safari, Edge, …).
	UABrowser UAKind = iota
	// UANone: no User-Agent, or an empty one.
	UANone
	// UAAutomation: an HTTP library or tool (curl, python-requests,
	// Go-http-client, wget, …).
	UAAutomation
	// UAHeadless: a headless browser (HeadlessChrome, PhantomJS, …).
	UAHeadless
	// UACrawler: a crawler pattern matches.
	UACrawler
	// UAUnknown: none of the above.
	UAUnknown
)

// Browser is the browser family a browser User-Agent names, for its
// header profile.
type Browser uint8

const (
	BrowserOther  Browser = iota
	BrowserChrome         // Chrome, Chromium, Edge, Opera, Brave: Blink
	BrowserFirefox
	BrowserSafari
)

// Claim is a crawler a User-Agent claims to be, whose operator publishes
// the ranges its crawler sends from.
type Claim uint8

const (
	ClaimNone Claim = iota
	ClaimGooglebot
	ClaimBingbot
)

// RequestSignals is what the request itself says.
type RequestSignals struct {
	UA      UAKind
	Browser Browser
	Claim   Claim
	// HasAccept, HasAcceptLanguage, HasAcceptEncoding: the header is
	// present with a value.
	HasAccept, HasAcceptLanguage, HasAcceptEncoding bool
	// BrowserHeadersMissing: a browser User-Agent without headers that
	// browser always sends.
	BrowserHeadersMissing bool
	// HeaderOrderMismatch: the headers' order or letter case is not what
	// the named browser sends.
	HeaderOrderMismatch bool
	// JA4Mismatch: for a browser User-Agent, the connection's TLS
	// fingerprint (rules.Request.JA4) does not fit the named browser
	// (JA4Fits). Config.Result sets it; ReadRequest, which reads headers
	// only, leaves it false.
	JA4Mismatch bool
}
