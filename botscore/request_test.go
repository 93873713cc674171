package botscore

import (
	"regexp/syntax"
	"strings"
	"testing"
)

// rawSource is a HeaderSource over a header block written out by hand,
// as fasthttp's RawHeaders returns it.
type rawSource struct{ ua, raw []byte }

func (s *rawSource) UserAgent() []byte  { return s.ua }
func (s *rawSource) RawHeaders() []byte { return s.raw }

// block writes header lines as a client sends them: CRLF after each, and
// the empty line that ends the block.
func headerLines(lines ...string) []byte {
	return []byte(strings.Join(lines, "\r\n") + "\r\n\r\n")
}

// source builds a HeaderSource from lines, taking the User-Agent from the
// block, as the gateway's request does.
func source(lines ...string) *rawSource {
	s := &rawSource{raw: headerLines(lines...)}
	for _, l := range lines {
		if name, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(name, "User-Agent") {
			s.ua = []byte(strings.TrimSpace(v))
		}
	}
	return s
}

const (
	chromeUA   = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	edgeUA     = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0"
	firefoxUA  = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
	safariUA   = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15"
	iphoneUA   = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1"
	headlessUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36"
)

func TestClassifyUserAgent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ua      string
		kind    UAKind
		browser Browser
		claim   Claim
	}{
		{"empty", "", UANone, BrowserOther, ClaimNone},
		{"blank", "  ", UANone, BrowserOther, ClaimNone},
		{"chrome", chromeUA, UABrowser, BrowserChrome, ClaimNone},
		{"edge", edgeUA, UABrowser, BrowserChrome, ClaimNone},
		{"opera", chromeUA + " OPR/115.0.0.0", UABrowser, BrowserChrome, ClaimNone},
		{"android webview", "Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/AP2A; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.81 Mobile Safari/537.36", UABrowser, BrowserChrome, ClaimNone},
		{"firefox", firefoxUA, UABrowser, BrowserFirefox, ClaimNone},
		{"safari", safariUA, UABrowser, BrowserSafari, ClaimNone},
		{"chrome on iOS is WebKit", iphoneUA, UABrowser, BrowserSafari, ClaimNone},
		{"internet explorer", "Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1; Trident/4.0)", UABrowser, BrowserOther, ClaimNone},
		{"opera mini is no 008 crawler", "Opera/9.80 (J2ME/MIDP; Opera Mini/4.4.39008/37.9178; U; en) Presto/2.12.423 Version/12.16", UABrowser, BrowserOther, ClaimNone},
		{"curl", "curl/8.5.0", UAAutomation, BrowserOther, ClaimNone},
		{"python-requests", "python-requests/2.31.0", UAAutomation, BrowserOther, ClaimNone},
		{"aiohttp", "Python/3.12 aiohttp/3.9.1", UAAutomation, BrowserOther, ClaimNone},
		{"go", "Go-http-client/1.1", UAAutomation, BrowserOther, ClaimNone},
		{"go upper case", "GO-HTTP-CLIENT/2.0", UAAutomation, BrowserOther, ClaimNone},
		{"okhttp", "okhttp/4.12.0", UAAutomation, BrowserOther, ClaimNone},
		{"java", "Java/17.0.2", UAAutomation, BrowserOther, ClaimNone},
		{"postman", "PostmanRuntime/7.36.0", UAAutomation, BrowserOther, ClaimNone},
		{"wget", "Wget/1.21.4", UAAutomation, BrowserOther, ClaimNone},
		{"headless chrome", headlessUA, UAHeadless, BrowserOther, ClaimNone},
		{"phantomjs", "Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1", UAHeadless, BrowserOther, ClaimNone},
		{"electron is a desktop app", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Slack/4.41.105 Chrome/130.0.6723.191 Electron/33.2.0 Safari/537.36", UABrowser, BrowserChrome, ClaimNone},
		{"googlebot", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", UACrawler, BrowserOther, ClaimGooglebot},
		{"googlebot smartphone", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", UACrawler, BrowserOther, ClaimGooglebot},
		{"bingbot", "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", UACrawler, BrowserOther, ClaimBingbot},
		{"adsbot is not a common crawler", "AdsBot-Google (+http://www.google.com/adsbot.html)", UACrawler, BrowserOther, ClaimNone},
		{"ahrefs", "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)", UACrawler, BrowserOther, ClaimNone},
		{"gptbot", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", UACrawler, BrowserOther, ClaimNone},
		{"crawler pattern with a class", "Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)", UACrawler, BrowserOther, ClaimNone},
		{"an app", "Spotify/8.9.96 Android/34 (Pixel 8)", UAUnknown, BrowserOther, ClaimNone},
		{"mozilla without an engine", "Mozilla/5.0 (compatible; FooApp/2.0)", UAUnknown, BrowserOther, ClaimNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kind, browser, claim := ClassifyUserAgent([]byte(tt.ua))
			if kind != tt.kind || browser != tt.browser || claim != tt.claim {
				t.Errorf("ClassifyUserAgent(%q) = %v, %v, %v; want %v, %v, %v", tt.ua, kind, browser, claim, tt.kind, tt.browser, tt.claim)
			}
		})
	}
}

// TestMatcherAgreesWithRegexps holds the prefilter to the plain answer:
// for every crawler instance, every corpus User-Agent and the browsers
// above, some pattern's regex matches exactly when the automaton-guided
// scan says so.
func TestMatcherAgreesWithRegexps(t *testing.T) {
	t.Parallel()
	m := matcher()
	ps, err := loadCrawlerPatterns()
	if err != nil {
		t.Fatal(err)
	}
	uas := []string{chromeUA, edgeUA, firefoxUA, safariUA, iphoneUA, headlessUA, "curl/8.5.0", ""}
	for _, p := range ps {
		uas = append(uas, p.Instances...)
	}
	for _, c := range readCorpus(t) {
		uas = append(uas, c.ua)
	}
	for _, ua := range uas {
		want := false
		for _, re := range m.patterns {
			if re.MatchString(ua) {
				want = true
				break
			}
		}
		// scan stops early at a tool's or a claim's token; judge the
		// regex part alone.
		f := m.scanPatterns([]byte(ua))
		if f != want {
			t.Errorf("scan(%q) crawler = %v, a regex matches: %v", ua, f, want)
		}
	}
}

func TestRequiredLiterals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		re   string
		want []string
	}{
		{`Googlebot\/`, []string{"googlebot/"}},
		{`[wW]get`, []string{"wget"}},
		{`^curl`, []string{"curl"}},
		{`(sistrix|SISTRIX) [cC]rawler`, []string{" crawler"}},
		{`Ahrefs(Bot|SiteAudit)`, []string{"ahrefs"}},
		{`S[eE][mM]rushBot`, []string{"semrushbot"}},
		{`AdsBot-Google([^-]|$)`, []string{"adsbot-google"}},
		{`(^| )sentry\/`, []string{"sentry/"}},
		{`BlogTraffic\/\d\.\d+ Feed-Fetcher`, []string{" feed-fetcher"}},
		{`(foo|ba)`, nil}, // "ba" is under minLiteral: the caller runs it always
		{`a.*`, []string{"a"}},
		{`x?`, nil},
	}
	for _, tt := range tests {
		re := mustParse(t, tt.re)
		got := requiredLiterals(re)
		if tt.re == `(foo|ba)` {
			if shortest(got) >= minLiteral {
				t.Errorf("requiredLiterals(%q) = %q: want a member under %d bytes", tt.re, got, minLiteral)
			}
			continue
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("requiredLiterals(%q) = %q, want %q", tt.re, got, tt.want)
		}
	}
}

func TestHeaderProfiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		src      *rawSource
		mismatch bool
		missing  bool
	}{
		{"chrome navigation over https", chromeNavigation(chromeUA, true), false, false},
		{"chrome navigation over plain http", chromeNavigation(chromeUA, false), false, false},
		{"chrome fetch", chromeFetch(chromeUA), false, false},
		{"edge navigation", chromeNavigation(edgeUA, true), false, false},
		{"firefox navigation", firefoxNavigation(firefoxUA), false, false},
		{"firefox fetch", firefoxFetch(firefoxUA), false, false},
		{"safari navigation", safariNavigation(safariUA), false, false},
		{"safari fetch", safariFetch(safariUA), false, false},
		{"ios chrome sends safari's", safariNavigation(iphoneUA), false, false},
		{"go net/http naming chrome", source("Host: example.com", "User-Agent: "+chromeUA, "Accept: text/html", "Accept-Language: en-US", "Accept-Encoding: gzip"), true, false},
		{"go net/http with connection set", source("Host: example.com", "User-Agent: "+chromeUA, "Accept: text/html", "Accept-Encoding: gzip, deflate, br", "Accept-Language: en-US", "Connection: keep-alive"), true, false},
		{"go net/http faking client hints", source("Host: example.com", "Connection: keep-alive", "Sec-Ch-Ua: \"Chromium\";v=\"131\"", "User-Agent: "+chromeUA, "Accept: text/html", "Accept-Encoding: gzip", "Accept-Language: en-US"), true, false},
		{"python-requests naming chrome", source("Host: example.com", "User-Agent: "+chromeUA, "Accept-Encoding: gzip, deflate", "Accept: */*", "Connection: keep-alive", "Accept-Language: en-US"), true, false},
		{"python-requests naming firefox", source("Host: example.com", "User-Agent: "+firefoxUA, "Accept-Encoding: gzip, deflate", "Accept: */*", "Connection: keep-alive", "Accept-Language: en-US"), true, false},
		{"node fetch naming chrome (lower case)", source("host: example.com", "connection: keep-alive", "user-agent: "+chromeUA, "accept: */*", "accept-language: *", "sec-fetch-mode: cors", "accept-encoding: gzip, deflate"), true, false},
		{"lower-case names naming safari", source("host: example.com", "user-agent: "+safariUA, "accept: */*", "accept-language: en", "accept-encoding: gzip"), true, false},
		{"curl naming chrome", source("Host: example.com", "User-Agent: "+chromeUA, "Accept: */*"), true, true},
		{"chrome without accept-language", source("Host: example.com", "Connection: keep-alive", "User-Agent: "+chromeUA, "Accept: */*", "Accept-Encoding: gzip"), false, true},
		{"empty accept-encoding counts as none", source("Host: example.com", "Connection: keep-alive", "User-Agent: "+chromeUA, "Accept: */*", "Accept-Encoding:", "Accept-Language: en"), false, true},
		{"internet explorer's order is not judged", source("Accept: text/html", "Accept-Language: en-US", "User-Agent: Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1; Trident/4.0)", "Accept-Encoding: gzip, deflate", "Host: example.com", "Connection: Keep-Alive"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sig RequestSignals
			ReadRequest(tt.src, &sig)
			if sig.UA != UABrowser {
				t.Fatalf("UA = %v, want UABrowser", sig.UA)
			}
			if sig.HeaderOrderMismatch != tt.mismatch {
				t.Errorf("HeaderOrderMismatch = %v, want %v\n%s", sig.HeaderOrderMismatch, tt.mismatch, tt.src.raw)
			}
			if sig.BrowserHeadersMissing != tt.missing {
				t.Errorf("BrowserHeadersMissing = %v, want %v", sig.BrowserHeadersMissing, tt.missing)
			}
		})
	}
}

// getterSource has no raw block, only a header lookup.
type getterSource struct{ h map[string]string }

func (s getterSource) UserAgent() []byte  { return []byte(s.h["user-agent"]) }
func (s getterSource) RawHeaders() []byte { return nil }
func (s getterSource) Header(name []byte) []byte {
	return []byte(s.h[strings.ToLower(string(name))])
}

func TestReadRequestWithoutRawHeaders(t *testing.T) {
	t.Parallel()
	var sig RequestSignals
	ReadRequest(getterSource{map[string]string{"user-agent": chromeUA, "accept": "*/*", "accept-language": "en"}}, &sig)
	if !sig.HasAccept || !sig.HasAcceptLanguage || sig.HasAcceptEncoding {
		t.Errorf("Has Accept, Accept-Language, Accept-Encoding = %v, %v, %v; want true, true, false", sig.HasAccept, sig.HasAcceptLanguage, sig.HasAcceptEncoding)
	}
	if sig.HeaderOrderMismatch {
		t.Error("HeaderOrderMismatch with no header block: want the order not judged")
	}
	if !sig.BrowserHeadersMissing {
		t.Error("BrowserHeadersMissing = false, want true (no Accept-Encoding)")
	}
}

// TestCalibration holds the calibration points through ReadRequest
// and Score.
func TestCalibration(t *testing.T) {
	t.Parallel()
	residential := NetSignals{ASN: 7922, Country: "US"}
	hosting := NetSignals{ASN: 16509, Country: "US", Hosting: true}
	tests := []struct {
		name  string
		src   *rawSource
		net   NetSignals
		below bool // score under 30
	}{
		{"curl", source("Host: example.com", "User-Agent: curl/8.5.0", "Accept: */*"), residential, true},
		{"python-requests", source("Host: example.com", "User-Agent: python-requests/2.31.0", "Accept-Encoding: gzip, deflate", "Accept: */*", "Connection: keep-alive"), residential, true},
		{"go", source("Host: example.com", "User-Agent: Go-http-client/1.1", "Accept-Encoding: gzip"), residential, true},
		{"no user agent", source("Host: example.com", "Accept: */*", "Accept-Language: en", "Accept-Encoding: gzip"), residential, true},
		{"no user agent, unknown network", source("Host: example.com"), NetSignals{}, true},
		{"headless chrome with chrome's headers", chromeNavigation(headlessUA, true), residential, true},
		{"chrome", chromeNavigation(chromeUA, true), residential, false},
		{"chrome, unknown network", chromeNavigation(chromeUA, true), NetSignals{}, false},
		{"chrome fetch", chromeFetch(chromeUA), residential, false},
		{"firefox", firefoxNavigation(firefoxUA), residential, false},
		{"safari", safariNavigation(safariUA), residential, false},
		{"iphone", safariNavigation(iphoneUA), residential, false},
		// The header order alone never takes a browser-like request under
		// 30; with a hosting network it does.
		{"chrome ua in python-requests' order", source("Host: example.com", "User-Agent: "+chromeUA, "Accept-Encoding: gzip, deflate", "Accept: */*", "Connection: keep-alive", "Accept-Language: en-US"), residential, false},
		{"chrome ua in python-requests' order, hosting", source("Host: example.com", "User-Agent: "+chromeUA, "Accept-Encoding: gzip, deflate", "Accept: */*", "Connection: keep-alive", "Accept-Language: en-US"), hosting, true},
		{"curl naming chrome", source("Host: example.com", "User-Agent: "+chromeUA, "Accept: */*"), residential, true},
		{"chrome from hosting", chromeNavigation(chromeUA, true), hosting, false},
		{"false googlebot", source("Host: example.com", "User-Agent: Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Accept: */*", "Accept-Encoding: gzip"), hosting, true},
		{"verified googlebot", source("Host: example.com", "User-Agent: Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Accept: */*", "Accept-Encoding: gzip"), NetSignals{ASN: 15169, Hosting: true, VerifiedClaim: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sig RequestSignals
			ReadRequest(tt.src, &sig)
			res := Score(&tt.net, &sig)
			if got := res.Score < 30; got != tt.below {
				t.Errorf("score %d (%s), want under 30: %v", res.Score, res.Reasons.AppendNames(nil), tt.below)
			}
		})
	}
}

func TestFalseClaimScoresAsBot(t *testing.T) {
	t.Parallel()
	var sig RequestSignals
	ReadRequest(source("Host: example.com", "User-Agent: Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "Accept: */*", "Accept-Encoding: gzip, deflate", "Accept-Language: en"), &sig)
	if sig.Claim != ClaimBingbot {
		t.Fatalf("Claim = %v, want ClaimBingbot", sig.Claim)
	}
	res := Score(&NetSignals{}, &sig)
	if !res.Reasons.Has(UnverifiedCrawler) || res.Score >= 30 {
		t.Errorf("score %d (%s), want under 30 with unverified_crawler", res.Score, res.Reasons.AppendNames(nil))
	}
}

// The header blocks browsers send over HTTP/1.1 (request.go's profiles).

func chromeNavigation(ua string, secure bool) *rawSource {
	if !secure { // plain HTTP to a host other than localhost: no client hints, no Sec-Fetch-*
		return source("Host: example.com", "Connection: keep-alive", "Upgrade-Insecure-Requests: 1", "User-Agent: "+ua,
			"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
			"Accept-Encoding: gzip, deflate", "Accept-Language: en-US,en;q=0.9")
	}
	return source("Host: example.com", "Connection: keep-alive",
		`sec-ch-ua: "Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"`, "sec-ch-ua-mobile: ?0", `sec-ch-ua-platform: "Windows"`,
		"Upgrade-Insecure-Requests: 1", "User-Agent: "+ua,
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
		"Sec-Fetch-Site: none", "Sec-Fetch-Mode: navigate", "Sec-Fetch-User: ?1", "Sec-Fetch-Dest: document",
		"Accept-Encoding: gzip, deflate, br, zstd", "Accept-Language: en-US,en;q=0.9")
}

func chromeFetch(ua string) *rawSource {
	return source("Host: example.com", "Connection: keep-alive", `sec-ch-ua-platform: "Windows"`, "User-Agent: "+ua,
		`sec-ch-ua: "Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"`, "Content-Type: application/json", "sec-ch-ua-mobile: ?0",
		"Accept: */*", "Origin: https://example.com", "Sec-Fetch-Site: same-origin", "Sec-Fetch-Mode: cors", "Sec-Fetch-Dest: empty",
		"Referer: https://example.com/", "Accept-Encoding: gzip, deflate, br, zstd", "Accept-Language: en-US,en;q=0.9", "Cookie: a=b")
}

func firefoxNavigation(ua string) *rawSource {
	return source("Host: example.com", "User-Agent: "+ua,
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "Accept-Language: en-US,en;q=0.5",
		"Accept-Encoding: gzip, deflate, br, zstd", "Connection: keep-alive", "Upgrade-Insecure-Requests: 1",
		"Sec-Fetch-Dest: document", "Sec-Fetch-Mode: navigate", "Sec-Fetch-Site: none", "Sec-Fetch-User: ?1", "Priority: u=0, i")
}

func firefoxFetch(ua string) *rawSource {
	return source("Host: example.com", "User-Agent: "+ua, "Accept: */*", "Accept-Language: en-US,en;q=0.5",
		"Accept-Encoding: gzip, deflate, br, zstd", "Referer: https://example.com/", "Content-Type: application/json",
		"Origin: https://example.com", "Connection: keep-alive", "Cookie: a=b",
		"Sec-Fetch-Dest: empty", "Sec-Fetch-Mode: cors", "Sec-Fetch-Site: same-origin", "Priority: u=4")
}

func safariNavigation(ua string) *rawSource {
	return source("Host: example.com", "Sec-Fetch-Dest: document", "User-Agent: "+ua,
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "Sec-Fetch-Site: none",
		"Sec-Fetch-Mode: navigate", "Accept-Language: en-GB,en;q=0.9", "Priority: u=0, i",
		"Accept-Encoding: gzip, deflate, br", "Connection: keep-alive")
}

func safariFetch(ua string) *rawSource {
	return source("Host: example.com", "Accept: */*", "Sec-Fetch-Site: same-origin", "Accept-Language: en-GB,en;q=0.9",
		"Accept-Encoding: gzip, deflate, br", "Sec-Fetch-Mode: cors", "Origin: https://example.com", "User-Agent: "+ua,
		"Referer: https://example.com/", "Sec-Fetch-Dest: empty", "Connection: keep-alive")
}

func mustParse(t *testing.T, re string) *syntax.Regexp {
	t.Helper()
	r, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func BenchmarkClassifyUserAgent(b *testing.B) {
	for _, bc := range []struct{ name, ua string }{
		{"browser", chromeUA},
		{"crawler", "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)"},
		{"googlebot", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"},
		{"curl", "curl/8.5.0"},
	} {
		ua := []byte(bc.ua)
		matcher()
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ClassifyUserAgent(ua)
			}
		})
	}
}

// BenchmarkCrawlerRegexpsOneByOne is the cost the matcher avoids: every
// crawler pattern's regex in turn over a browser User-Agent (none match).
func BenchmarkCrawlerRegexpsOneByOne(b *testing.B) {
	m := matcher()
	ua := []byte(chromeUA)
	b.ReportAllocs()
	for b.Loop() {
		for _, re := range m.patterns {
			if re.Match(ua) {
				b.Fatal("a crawler pattern matches chrome")
			}
		}
	}
}

func BenchmarkReadRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		src  *rawSource
	}{
		{"chrome", chromeNavigation(chromeUA, true)},
		{"firefox", firefoxNavigation(firefoxUA)},
		{"curl", source("Host: example.com", "User-Agent: curl/8.5.0", "Accept: */*")},
	} {
		matcher()
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sig RequestSignals
			for b.Loop() {
				ReadRequest(bc.src, &sig)
			}
		})
	}
}
