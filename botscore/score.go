package botscore

import "strconv"

// The score (docs/botscore.md): 1 (certainly automated) to 99 (certainly
// human), Cloudflare's convention. It starts at 99 and every reason the
// signals give subtracts its weight; the result is clamped to 1..99. The
// weights live in this one table, and Score is a pure function of the
// signals, so a test can state why a request scored what it did.

// Reason is one thing that lowered a request's score.
type Reason uint8

// The reasons, in the order X-Edge-Bot-Reasons lists them.
const (
	NoUserAgent Reason = iota
	AutomationUserAgent
	HeadlessBrowser
	CrawlerUserAgent
	UnverifiedCrawler
	UnknownUserAgent
	MissingAccept
	MissingAcceptLanguage
	MissingAcceptEncoding
	BrowserHeadersMissing
	HeaderOrder
	HostingNetwork
	AnonymousVPN
	TorExit
	ResidentialProxy
	JA4Mismatch
	numReasons
)

// reasonInfo is a reason's name (as X-Edge-Bot-Reasons writes it), weight
// (points subtracted from 99) and one-line meaning (docs/botscore.md).
type reasonInfo struct {
	name    string
	weight  int
	meaning string
}

// Reasons is the weights table. Calibration (issue 12): curl,
// python-requests, Go-http-client and requests without a user agent score
// under 30; a mainstream browser with Accept, Accept-Language and
// Accept-Encoding scores 30 or more from a residential or unknown network,
// and less from a hosting one; a header order unlike the named browser's
// takes a browser-like request under 30 only together with another signal
// (45 alone leaves 54; with a hosting network, 24). A TLS fingerprint
// unlike the named browser's weighs as much and for the same reason: a
// TLS-intercepting proxy or antivirus re-originates a person's TLS, so it
// alone never takes a browser-like request under 30 (botscore/ja4.go).
var reasons = [numReasons]reasonInfo{
	NoUserAgent:           {"no_user_agent", 80, "the request has no User-Agent"},
	AutomationUserAgent:   {"automation_user_agent", 80, "the User-Agent is an HTTP library or tool (curl, python-requests, Go-http-client, …)"},
	HeadlessBrowser:       {"headless_browser", 75, "the User-Agent names a headless browser (HeadlessChrome, PhantomJS, …)"},
	CrawlerUserAgent:      {"crawler_user_agent", 75, "the User-Agent matches a known crawler pattern"},
	UnverifiedCrawler:     {"unverified_crawler", 80, "the User-Agent claims a crawler whose operator's published ranges do not hold the client"},
	UnknownUserAgent:      {"unknown_user_agent", 30, "the User-Agent is neither a browser's nor a known tool's"},
	MissingAccept:         {"missing_accept", 20, "no Accept header"},
	MissingAcceptLanguage: {"missing_accept_language", 20, "no Accept-Language header"},
	MissingAcceptEncoding: {"missing_accept_encoding", 20, "no Accept-Encoding header"},
	BrowserHeadersMissing: {"browser_headers_missing", 25, "a browser User-Agent without headers that browser always sends"},
	HeaderOrder:           {"header_order", 45, "the headers' order or letter case is not the named browser's"},
	HostingNetwork:        {"hosting_network", 30, "the client is on a hosting or datacenter network"},
	AnonymousVPN:          {"anonymous_vpn", 30, "the client is a known VPN exit"},
	TorExit:               {"tor_exit", 40, "the client is a Tor exit node"},
	ResidentialProxy:      {"residential_proxy", 35, "the client is a known residential proxy"},
	JA4Mismatch:           {"ja4_mismatch", 45, "the TLS fingerprint (JA4) is an HTTP library's, or not the named browser's"},
}

// Name returns the reason's name as X-Edge-Bot-Reasons writes it.
func (r Reason) Name() string { return reasons[r].name }

// Weight returns the points the reason subtracts from 99.
func (r Reason) Weight() int { return reasons[r].weight }

// Meaning returns the reason's one-line meaning.
func (r Reason) Meaning() string { return reasons[r].meaning }

// AllReasons lists every reason, in order.
func AllReasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// ReasonSet is a set of reasons, one bit each.
type ReasonSet uint32

// Has reports whether r is in the set.
func (s ReasonSet) Has(r Reason) bool { return s&(1<<r) != 0 }

func (s *ReasonSet) add(r Reason) { *s |= 1 << r }

// AppendNames appends the set's names, comma-separated, in table order.
func (s ReasonSet) AppendNames(dst []byte) []byte {
	first := true
	for r := Reason(0); r < numReasons; r++ {
		if s.Has(r) {
			if !first {
				dst = append(dst, ',')
			}
			dst = append(dst, reasons[r].name...)
			first = false
		}
	}
	return dst
}

// Result is a request's score and the reasons that produced it.
type Result struct {
	Score   uint8
	Reasons ReasonSet
}

// AppendScore appends the score in decimal (X-Edge-Bot-Score).
func (r Result) AppendScore(dst []byte) []byte { return strconv.AppendUint(dst, uint64(r.Score), 10) }

// Score scores a request from its signals: 99 less the weights of the
// reasons they give, clamped to 1..99. A verified crawler (a Googlebot or
// Bingbot claim that its operator's published ranges hold) is a known good
// bot: neither its user agent nor its operator's hosting network counts
// against it. A false claim is UnverifiedCrawler, weighed as a bot.
func Score(n *NetSignals, q *RequestSignals) Result {
	var set ReasonSet
	switch {
	case q.UA == UANone:
		set.add(NoUserAgent)
	case q.UA == UAAutomation:
		set.add(AutomationUserAgent)
	case q.UA == UAHeadless:
		set.add(HeadlessBrowser)
	case q.UA == UACrawler && q.Claim != ClaimNone && !n.VerifiedClaim:
		set.add(UnverifiedCrawler)
	case q.UA == UACrawler && !n.VerifiedClaim:
		set.add(CrawlerUserAgent)
	case q.UA == UAUnknown:
		set.add(UnknownUserAgent)
	}
	if !q.HasAccept {
		set.add(MissingAccept)
	}
	if !q.HasAcceptLanguage {
		set.add(MissingAcceptLanguage)
	}
	if !q.HasAcceptEncoding {
		set.add(MissingAcceptEncoding)
	}
	if q.UA == UABrowser && q.BrowserHeadersMissing {
		set.add(BrowserHeadersMissing)
	}
	if q.UA == UABrowser && q.HeaderOrderMismatch {
		set.add(HeaderOrder)
	}
	if q.UA == UABrowser && q.JA4Mismatch {
		set.add(JA4Mismatch)
	}
	if n.Hosting && !n.VerifiedClaim {
		set.add(HostingNetwork)
	}
	if n.VPN {
		set.add(AnonymousVPN)
	}
	if n.Tor {
		set.add(TorExit)
	}
	if n.ResidentialProxy {
		set.add(ResidentialProxy)
	}
	score := 99
	for r := Reason(0); r < numReasons; r++ {
		if set.Has(r) {
			score -= reasons[r].weight
		}
	}
	return Result{Score: uint8(min(max(score, 1), 99)), Reasons: set}
}
