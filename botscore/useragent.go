package botscore

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"slices"
	"sync"
	"unsafe"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// The User-Agent classifier (docs/botscore.md, "Request signals"). One
// pass of an Aho-Corasick automaton over the ASCII-folded User-Agent finds
// every token it knows: the automation tools', the headless browsers', the
// verified crawlers' names, and at least one literal that each crawler
// pattern of data/useragents/crawler-user-agents.json requires (extracted
// from the regex with regexp/syntax). Only the patterns whose literal
// occurs run their full regex, case-sensitive as the list writes them. A
// browser User-Agent is about 150 bytes: one table lookup a byte, no
// regex, no allocation.

//go:embed data/useragents/crawler-user-agents.json
var crawlerJSON []byte

// automationTokens name HTTP libraries and command-line tools, matched
// case-insensitively anywhere in the User-Agent. Each carries its
// separator so that a word inside a browser's or an app's name does not
// match; Java's carries its version's first digit, because feature
// phones' browsers write "Java/ASVM/1.1".
var automationTokens = []string{
	"curl/", "libcurl", "pycurl/", "wget/", "wget2/",
	"python-requests/", "python-urllib/", "python-httpx/", "aiohttp/", "urllib3/", "httplib2/",
	"go-http-client/", "go-resty/", "okhttp/", "java/1", "java/2", "java/3", "java/4", "java/5", "java/6", "java/7", "java/8", "java/9", "apache-httpclient/", "jakarta commons-httpclient",
	"node-fetch/", "node-fetch (", "undici", "axios/", "got (https://github.com/sindresorhus/got",
	"libwww-perl/", "lwp::simple", "scrapy/", "postmanruntime/", "insomnia/", "httpie/",
	"guzzlehttp/", "reqwest/", "dart/", "deno/", "bun/", "windowspowershell/", "faraday v",
	"rest-client/", "http.rb/", "aws-sdk-", "aws-cli/", "boto3/", "botocore/", "rclone/", "aria2/",
}

// headlessTokens name headless or scripted browsers. Electron is not here:
// its User-Agent is a desktop application's (Slack, VS Code), driven by a
// person.
var headlessTokens = []string{
	"headlesschrome", "phantomjs", "slimerjs", "jsdom/", "puppeteer", "playwright", "selenium", "webdriver",
}

// claimTokens are the names whose operators publish their crawlers' ranges
// (data/SOURCES.md): Google's common crawlers (googlebot.json) and Bing's
// (bingbot.json). Google's special-case crawlers (AdsBot-Google,
// Mediapartners-Google) send from other ranges and are plain crawlers here.
var claimTokens = []struct {
	token string
	claim Claim
}{
	{"googlebot", ClaimGooglebot},
	{"google-inspectiontool", ClaimGooglebot},
	{"googleother", ClaimGooglebot},
	{"storebot-google", ClaimGooglebot},
	{"google-cloudvertexbot", ClaimGooglebot},
	{"bingbot", ClaimBingbot},
	{"msnbot", ClaimBingbot},
	{"bingpreview", ClaimBingbot},
	{"adidxbot", ClaimBingbot},
}

// crawlerOverrides replace crawler patterns that also match real browsers
// (the accuracy test in accuracy_test.go finds them).
var crawlerOverrides = map[string]string{
	// The "008" crawler's `008/` matches Opera Mini's build number
	// ("Opera Mini/4.4.39008/37.9178"); the crawler writes "008/0.83".
	`008\/`: `(?:^|[^0-9.])008\/`,
	// 80legs' pattern is an Android build id that OPPO phones' real
	// browsers send; keep the crawler's own User-Agent, an Instagram
	// webview on that build.
	`AP3A\.240617\.008`: `AP3A\.240617\.008; wv\).* Instagram 406\.0\.0\.58\.159 `,
	// `RED\/` matches the WIRED app ("WIRED/3.2.3"); the crawler writes
	// "RED/1.0" as a word of its own.
	`RED\/`: `(?:^|[^A-Za-z])RED\/`,
}

// minLiteral is the shortest literal worth a prefilter entry: a pattern
// whose every required literal is shorter runs its regex on every
// User-Agent.
const minLiteral = 3

// A target is what a literal's occurrence means.
type target struct {
	kind  uint8 // targetCrawler, targetAutomation, targetHeadless, targetClaim
	claim Claim
	idx   int32 // the crawler pattern, for targetCrawler
}

const (
	targetCrawler uint8 = iota
	targetAutomation
	targetHeadless
	targetClaim
)

// uaMatcher is the compiled classifier, built once (matcher()).
type uaMatcher struct {
	ac       automaton
	targets  [][]target // by literal
	patterns []*regexp.Regexp
	// always lists the patterns with no literal of minLiteral bytes.
	always []int32
}

// crawlerPattern is one entry of crawler-user-agents.json.
type crawlerPattern struct {
	Pattern   string   `json:"pattern"`
	Instances []string `json:"instances"`
}

func loadCrawlerPatterns() ([]crawlerPattern, error) {
	var ps []crawlerPattern
	if err := json.Unmarshal(crawlerJSON, &ps); err != nil {
		return nil, fmt.Errorf("decoding crawler-user-agents.json: %w", err)
	}
	return ps, nil
}

// matcher returns the classifier, compiling it on first use (about 20 ms).
// The embedded list is fixed at build time, so a failure is a programmer
// error.
var matcher = sync.OnceValue(func() *uaMatcher {
	m, err := compileMatcher()
	if err != nil {
		panic("botscore: " + err.Error())
	}
	return m
})

func compileMatcher() (*uaMatcher, error) {
	ps, err := loadCrawlerPatterns()
	if err != nil {
		return nil, err
	}
	m := &uaMatcher{patterns: make([]*regexp.Regexp, len(ps))}
	litID := map[string]int{}
	var lits []string
	add := func(lit string, t target) {
		id, ok := litID[lit]
		if !ok {
			id = len(lits)
			litID[lit] = id
			lits = append(lits, lit)
			m.targets = append(m.targets, nil)
		}
		if !slices.Contains(m.targets[id], t) {
			m.targets[id] = append(m.targets[id], t)
		}
	}
	for i, p := range ps {
		src := p.Pattern
		if o, ok := crawlerOverrides[src]; ok {
			src = o
		}
		re, err := regexp.Compile(src)
		if err != nil {
			return nil, fmt.Errorf("compiling crawler pattern %q: %w", p.Pattern, err)
		}
		m.patterns[i] = re
		parsed, err := syntax.Parse(src, syntax.Perl)
		if err != nil {
			return nil, fmt.Errorf("parsing crawler pattern %q: %w", p.Pattern, err)
		}
		req := requiredLiterals(parsed)
		if len(req) == 0 || shortest(req) < minLiteral {
			m.always = append(m.always, int32(i))
			continue
		}
		for _, lit := range req {
			add(lit, target{kind: targetCrawler, idx: int32(i)})
		}
	}
	for _, tok := range automationTokens {
		add(tok, target{kind: targetAutomation})
	}
	for _, tok := range headlessTokens {
		add(tok, target{kind: targetHeadless})
	}
	for _, c := range claimTokens {
		add(c.token, target{kind: targetClaim, claim: c.claim})
	}
	m.ac = buildAutomaton(lits)
	return m, nil
}

// maxAlternatives bounds a required-literal set: a pattern whose literal
// alternatives are more than this many runs its regex always instead.
const maxAlternatives = 16

// requiredLiterals returns ASCII-lowercased strings of which every match of
// re contains at least one, or nil when it finds none. It is conservative:
// it may return nil for a regex that has literals, never a set a match can
// avoid.
func requiredLiterals(re *syntax.Regexp) []string {
	if s, ok := exactString(re); ok {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
	case syntax.OpAlternate:
		var set []string
		for _, sub := range re.Sub {
			r := requiredLiterals(sub)
			if r == nil {
				return nil
			}
			set = append(set, r...)
		}
		slices.Sort(set)
		set = slices.Compact(set)
		if len(set) > maxAlternatives {
			return nil
		}
		return set
	case syntax.OpConcat:
		// The best of: each run of adjacent exact pieces joined, and each
		// other child's own set. Zero-width pieces (anchors) neither add
		// to a run nor end it.
		var best []string
		consider := func(set []string) {
			if len(set) > 0 && (best == nil || better(set, best)) {
				best = set
			}
		}
		run := ""
		for _, sub := range re.Sub {
			if zeroWidth(sub) {
				continue
			}
			if s, ok := exactString(sub); ok {
				run += s
				continue
			}
			if run != "" {
				consider([]string{run})
				run = ""
			}
			consider(requiredLiterals(sub))
		}
		if run != "" {
			consider([]string{run})
		}
		return best
	}
	return nil
}

// better reports whether literal set a prefilters better than b: a longer
// shortest member, then fewer members.
func better(a, b []string) bool {
	if sa, sb := shortest(a), shortest(b); sa != sb {
		return sa > sb
	}
	return len(a) < len(b)
}

func shortest(set []string) int {
	n := -1
	for _, s := range set {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return n
}

func zeroWidth(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpEmptyMatch:
		return true
	}
	return false
}

// exactString returns the lowercased string re matches, when re matches
// one string up to ASCII case: a literal, a class of one letter in both
// cases ([Cc]), or a capture or concatenation of those.
func exactString(re *syntax.Regexp) (string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		b := []byte(string(re.Rune))
		for i, c := range b {
			b[i] = lower(c)
		}
		return string(b), true
	case syntax.OpCharClass:
		// re.Rune holds ranges lo, hi pairs.
		r := re.Rune
		switch {
		case len(r) == 2 && r[0] == r[1] && r[0] < 0x80:
			return string(rune(lower(byte(r[0])))), true
		case len(r) == 4 && r[0] == r[1] && r[2] == r[3] && r[2] < 0x80 &&
			r[0] >= 'A' && r[0] <= 'Z' && r[2] == r[0]+('a'-'A'):
			return string(rune(r[2])), true
		}
	case syntax.OpCapture:
		return exactString(re.Sub[0])
	case syntax.OpConcat:
		out := ""
		for _, sub := range re.Sub {
			if zeroWidth(sub) {
				return "", false // an anchor inside would change what matches where
			}
			s, ok := exactString(sub)
			if !ok {
				return "", false
			}
			out += s
		}
		return out, true
	}
	return "", false
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// uaFacts is what one pass over a User-Agent found.
type uaFacts struct {
	automation, headless bool
	claim                Claim
	crawler              bool
}

// maxPatterns bounds the crawler list (the candidate bit set is on the
// stack); compileMatcher's list has 1498.
const maxPatterns = 64 * 40

// scan runs the automaton over ua and the regexes of the patterns whose
// literals occur, stopping at the first that matches; a tool's or a
// claim's token decides without a regex.
func (m *uaMatcher) scan(ua []byte) uaFacts { return m.scanFull(ua, false) }

// scanPatterns reports whether a crawler pattern matches ua, tokens aside.
func (m *uaMatcher) scanPatterns(ua []byte) bool { return m.scanFull(ua, true).crawler }

func (m *uaMatcher) scanFull(ua []byte, patternsOnly bool) uaFacts {
	var f uaFacts
	var cand [maxPatterns / 64]uint64
	found := false
	m.ac.each(ua, func(lit int32) {
		for _, t := range m.targets[lit] {
			switch t.kind {
			case targetCrawler:
				cand[t.idx>>6] |= 1 << (t.idx & 63)
				found = true
			case targetAutomation:
				f.automation = true
			case targetHeadless:
				f.headless = true
			case targetClaim:
				if f.claim == ClaimNone {
					f.claim = t.claim
				}
			}
		}
	})
	if !patternsOnly && (f.automation || f.headless || f.claim != ClaimNone) {
		return f // decided without a regex
	}
	if found {
		for w, word := range cand {
			for word != 0 {
				i := w<<6 | bits.TrailingZeros64(word)
				word &= word - 1
				if m.patterns[i].Match(ua) {
					f.crawler = true
					return f
				}
			}
		}
	}
	for _, i := range m.always {
		if m.patterns[i].Match(ua) {
			f.crawler = true
			return f
		}
	}
	return f
}

// ClassifyUserAgent says what a User-Agent names: its kind, the browser
// family (for a browser) and the crawler it claims to be. It allocates
// nothing; the first call compiles the crawler list.
func ClassifyUserAgent(ua []byte) (UAKind, Browser, Claim) {
	ua = httpsyntax.TrimOWS(ua)
	if len(ua) == 0 {
		return UANone, BrowserOther, ClaimNone
	}
	f := matcher().scan(ua)
	switch {
	case f.headless:
		return UAHeadless, BrowserOther, ClaimNone
	case f.automation:
		return UAAutomation, BrowserOther, ClaimNone
	case f.claim != ClaimNone:
		return UACrawler, BrowserOther, f.claim
	case f.crawler:
		return UACrawler, BrowserOther, ClaimNone
	}
	if b, ok := browserFamily(ua); ok {
		return UABrowser, b, ClaimNone
	}
	return UAUnknown, BrowserOther, ClaimNone
}

// browserFamily recognises a browser's User-Agent by the shape every
// engine has kept for compatibility: "Mozilla/5.0 (" with an engine token
// (AppleWebKit/, Gecko/, Trident/, Presto), Internet Explorer's
// "Mozilla/4.0 (compatible; MSIE", or Presto Opera's "Opera/". The family
// picks the header profile: every iOS browser is WebKit (Safari's
// headers), Chromium's brands (Edge, Opera, Brave, Samsung, Android
// WebView) send Chrome's.
func browserFamily(ua []byte) (Browser, bool) {
	switch {
	case hasPrefix(ua, "Mozilla/5.0 ("):
	case hasPrefix(ua, "Mozilla/4.0 (compatible; MSIE"), hasPrefix(ua, "Opera/"):
		return BrowserOther, true
	default:
		return BrowserOther, false
	}
	webkit := contains(ua, "AppleWebKit/")
	switch {
	case webkit && (contains(ua, "iPhone") || contains(ua, "iPad") || contains(ua, "iPod")):
		return BrowserSafari, true
	case contains(ua, "Firefox/") && contains(ua, "Gecko/"):
		return BrowserFirefox, true
	case webkit && (contains(ua, "Chrome/") || contains(ua, "Chromium/")):
		return BrowserChrome, true
	case webkit:
		return BrowserSafari, true
	case contains(ua, "Gecko/"), contains(ua, "Trident/"), contains(ua, "MSIE "), contains(ua, "Presto/"):
		return BrowserOther, true
	}
	return BrowserOther, false
}

func hasPrefix(b []byte, s string) bool { return len(b) >= len(s) && string(b[:len(s)]) == s }

func contains(b []byte, s string) bool {
	return bytes.Contains(b, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// automaton is an Aho-Corasick automaton over ASCII-folded bytes, compiled
// to a dense DFA: trans[state*classes+class[b]] is the next state, and
// out[outStart[s]:outStart[s+1]] the literals that end at state s
// (through its failure links too).
//
// Why not a library: github.com/coregx/ahocorasick's Find returns a fresh
// *Match (an allocation a call) and reports one literal per end position,
// so a prefilter would miss a second pattern's literal ending at the same
// byte; its FindAllOverlapping allocates its result. The prefilter needs
// every literal that occurs, with no allocation, which is this page.
type automaton struct {
	class    [256]uint8
	classes  int
	trans    []uint32 // row offset of the next state | hasOut
	outStart []int32
	out      []int32
}

func buildAutomaton(lits []string) automaton {
	var a automaton
	// Byte classes: one per distinct folded byte of the literals, 0 for
	// every other byte. Upper-case letters share their lower-case class.
	for _, lit := range lits {
		for i := 0; i < len(lit); i++ {
			c := lit[i]
			if a.class[c] == 0 {
				a.classes++
				a.class[c] = uint8(a.classes)
			}
		}
	}
	a.classes++ // class 0
	for c := 'A'; c <= 'Z'; c++ {
		a.class[c] = a.class[c+('a'-'A')]
	}
	// The trie, dense from the start: -1 is no edge yet.
	trans := make([]int32, a.classes)
	for i := range trans {
		trans[i] = -1
	}
	own := [][]int32{nil}
	for id, lit := range lits {
		s := int32(0)
		for i := 0; i < len(lit); i++ {
			k := int(s)*a.classes + int(a.class[lit[i]])
			if trans[k] < 0 {
				next := int32(len(own))
				own = append(own, nil)
				for range a.classes {
					trans = append(trans, -1)
				}
				trans[k] = next
			}
			s = trans[k]
		}
		own[s] = append(own[s], int32(id))
	}
	// Breadth-first: fill missing edges from the failure state, and add
	// the failure state's outputs to each state's.
	n := len(own)
	fail := make([]int32, n)
	outs := make([][]int32, n)
	queue := make([]int32, 0, n)
	outs[0] = own[0]
	for c := 0; c < a.classes; c++ {
		if t := trans[c]; t < 0 {
			trans[c] = 0
		} else {
			fail[t] = 0
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		outs[s] = append(slices.Clone(own[s]), outs[fail[s]]...)
		for c := 0; c < a.classes; c++ {
			k := int(s)*a.classes + c
			fk := int(fail[s])*a.classes + c
			if t := trans[k]; t < 0 {
				trans[k] = trans[fk]
			} else {
				fail[t] = trans[fk]
				queue = append(queue, t)
			}
		}
	}
	// Premultiplied: an entry is the next state's row offset, with
	// hasOut set when that state ends a literal, so the search loop does
	// one dependent load a byte.
	if n*a.classes >= hasOut {
		panic("botscore: the crawler literals make too many automaton states")
	}
	a.trans = make([]uint32, len(trans))
	for i, t := range trans {
		a.trans[i] = uint32(int(t) * a.classes)
		if len(outs[t]) > 0 {
			a.trans[i] |= hasOut
		}
	}
	a.outStart = make([]int32, n+1)
	for s := range n {
		a.out = append(a.out, outs[s]...)
		a.outStart[s+1] = int32(len(a.out))
	}
	return a
}

// hasOut flags a transition into a state that ends a literal.
const hasOut = 1 << 31

// each calls fn with every literal that occurs in b, once per occurrence.
func (a *automaton) each(b []byte, fn func(lit int32)) {
	trans, class := a.trans, &a.class
	s := uint32(0)
	for _, c := range b {
		s = trans[s+uint32(class[c])]
		if s&hasOut != 0 {
			s &^= hasOut
			id := int(s) / a.classes
			for _, lit := range a.out[a.outStart[id]:a.outStart[id+1]] {
				fn(lit)
			}
		}
	}
}
