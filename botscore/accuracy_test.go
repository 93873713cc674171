package botscore

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The accuracy test on real data (BENCHMARKS.md, "Bot score: request
// signals"): real browser User-Agents sent with their browser's headers
// from a residential address must score 30 or more, and the crawler
// patterns' own example User-Agents must score under 30.

// corpusPath is uap-core's test corpus (testdata/data/useragents/SOURCES.md).
const corpusPath = "../testdata/data/useragents/uap-core-test_ua.yaml"

type corpusEntry struct{ ua, family string }

// readCorpus reads the corpus's user_agent_string and family pairs. The
// file is a flat YAML list of single- or double-quoted scalars, so a line
// reader is enough.
func readCorpus(t testing.TB) []corpusEntry {
	t.Helper()
	f, err := os.Open(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusEntry
	var ua string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "- user_agent_string: "); ok {
			ua = unquoteYAML(v)
		} else if v, ok := strings.CutPrefix(line, "family: "); ok {
			out = append(out, corpusEntry{ua: ua, family: unquoteYAML(v)})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1601 {
		t.Fatalf("read %d corpus entries, want 1601 (SOURCES.md)", len(out))
	}
	return out
}

func unquoteYAML(v string) string {
	switch {
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'")
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(v[1 : len(v)-1])
	}
	return v
}

// The corpus is not all browsers: 581 of its 1601 families name a bot,
// spider or crawler, and others a library or a monitor. A browser here is
// an entry whose User-Agent has a browser's shape (it starts "Mozilla/" or
// "Opera/", as every browser's has since the 1990s and no HTTP library's
// does) and whose family the labels do not name a bot: botFamily's words,
// and the crawlers, monitors and tools of notBrowserFamilies, each
// checked by hand in the corpus.
var botFamily = regexp.MustCompile(`(?i)bot|spider|crawl|headless|phantom|slurp|scrap|archiv|monitor|preview|fetch|validator|synthetic|pingdom|lighthouse|pagespeed`)

var notBrowserFamilies = map[string]bool{
	"008": true, "heritrix": true, "ZyBorg": true, "OpenVAS Scanner": true, "Google-InspectionTool": true,
	"Catchpoint": true, "GomezAgent": true, "Datanyze": true, "Python-urllib": true, "Google-HTTP-Java-Client": true,
	"WebThumb": true, "Thumbshots.ru": true, "Web-sniffer": true, "HTTrack": true, "Monitis": true, "Rival IQ": true,
	"SiteCon": true, "Qwantify": true, "Vagabondo": true, "PaxleFramework": true, "clumboot": true, "lycos": true,
	"scooter": true, "Charlotte": true, "Daumoa": true, "Genieo": true, "Kraken": true, "Peew": true, "Steeler": true,
	"WebCrunch": true, "Infohelfer": true, "PathDefender": true, "Goodzer": true, "InfuzApp": true, "RecipeRadar": true,
}

func isCorpusBrowser(e corpusEntry) bool {
	if strings.Contains(e.ua, "Google Web Preview") {
		// Labelled "Chrome", but Google's page-preview fetcher
		// (data/useragents/SOURCES.md).
		return false
	}
	return (strings.HasPrefix(e.ua, "Mozilla/") || strings.HasPrefix(e.ua, "Opera/")) &&
		!botFamily.MatchString(e.family) && !notBrowserFamilies[e.family]
}

// usualHeaders writes the navigation header block the browser a
// User-Agent names sends (request_test.go's profiles). It decides the
// engine from the User-Agent on its own, not through browserFamily.
func usualHeaders(ua string) *rawSource {
	switch {
	case strings.Contains(ua, "iPhone") || strings.Contains(ua, "iPad") || strings.Contains(ua, "iPod"):
		return safariNavigation(ua)
	case strings.Contains(ua, "Firefox/"):
		return firefoxNavigation(ua)
	case strings.Contains(ua, "Chrome/") || strings.Contains(ua, "Chromium/"):
		return chromeNavigation(ua, true)
	case strings.Contains(ua, "AppleWebKit/"):
		return safariNavigation(ua)
	}
	// Internet Explorer, Presto Opera, older engines.
	return source("Accept: text/html, application/xhtml+xml, */*", "Accept-Language: en-US", "User-Agent: "+ua,
		"Accept-Encoding: gzip, deflate", "Host: example.com", "Connection: Keep-Alive")
}

func TestAccuracyBrowsers(t *testing.T) {
	t.Parallel()
	var n, below int
	for _, e := range readCorpus(t) {
		if !isCorpusBrowser(e) {
			continue
		}
		n++
		var sig RequestSignals
		ReadRequest(usualHeaders(e.ua), &sig)
		res := Score(&NetSignals{}, &sig) // residential: the network says nothing
		if res.Score < 30 {
			below++
			t.Logf("browser under 30: %d (%s) family %q: %s", res.Score, res.Reasons.AppendNames(nil), e.family, e.ua)
		}
	}
	rate := 100 * float64(below) / float64(n)
	t.Logf("browsers: %d of %d real browser User-Agents (uap-core) score under 30 (%.2f%%; at most 1%% allowed)", below, n, rate)
	if n < 400 {
		t.Errorf("only %d browser entries selected: the selection is broken", n)
	}
	if rate > 1 {
		t.Errorf("%.2f%% of browsers score under 30, want at most 1%%", rate)
	}
}

func TestAccuracyCrawlers(t *testing.T) {
	t.Parallel()
	ps, err := loadCrawlerPatterns()
	if err != nil {
		t.Fatal(err)
	}
	var n, below, named, belowDressed int
	for _, p := range ps {
		for _, ua := range p.Instances {
			n++
			// As crawlers send: the User-Agent, and none of a browser's headers.
			var sig RequestSignals
			ReadRequest(source("Host: example.com", "User-Agent: "+ua), &sig)
			if res := Score(&NetSignals{}, &sig); res.Score < 30 {
				below++
			} else {
				t.Logf("crawler at %d (%s): %s", res.Score, res.Reasons.AppendNames(nil), ua)
			}
			// The stricter test: the User-Agent alone must name a bot, and
			// the instance dressed in a browser's headers must still score
			// under 30.
			if sig.UA == UACrawler || sig.UA == UAAutomation || sig.UA == UAHeadless {
				named++
			} else {
				t.Logf("crawler User-Agent classified %v: %s", sig.UA, ua)
			}
			var dressed RequestSignals
			ReadRequest(usualHeaders(ua), &dressed)
			if Score(&NetSignals{}, &dressed).Score < 30 {
				belowDressed++
			}
		}
	}
	pct := func(k int) float64 { return 100 * float64(k) / float64(n) }
	t.Logf("crawlers: %d of %d instances score under 30 without browser headers (%.2f%%; at least 99%% required)", below, n, pct(below))
	t.Logf("crawlers: %d of %d named a bot by the User-Agent alone (%.2f%%); %d under 30 even with a browser's headers (%.2f%%)", named, n, pct(named), belowDressed, pct(belowDressed))
	if pct(below) < 99 {
		t.Errorf("%.2f%% of crawler instances score under 30, want at least 99%%", pct(below))
	}
	if pct(named) < 99 {
		t.Errorf("%.2f%% of crawler instances are named a bot by their User-Agent, want at least 99%%", pct(named))
	}
}
