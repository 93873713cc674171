package gateway

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// newBotsSetup is the decision path of a policy whose rule needs the bot
// score (bot_score_below), on the MaxMind test databases and the hosting
// list: both lookups and the header signals run in decide. The request is
// parsed from the wire, so its raw headers (order and case) are there.
func newBotsSetup(tb testing.TB, rawReq string) *benchSetup {
	tb.Helper()
	root := repoRoot(tb)
	src := fmt.Sprintf(`
edge {
  trusted_proxies = ["10.0.0.0/8"]
}
botscore {
  asn_database     = %q
  country_database = %q
  hosting_asns     = %q
}
rule "signup-bots" {
  paths  = ["/signup"]
  key    = ["ip"]
  limit  = 100000
  period = "1s"
  when {
    bot_score_below = 30
  }
}
rule "per-asn" {
  paths  = ["/signup"]
  key    = ["asn", "country"]
  limit  = 100000
  period = "1s"
}
`, filepath.Join(root, "testdata/data/mmdb/GeoLite2-ASN-Test.mmdb"), filepath.Join(root, "testdata/data/mmdb/GeoIP2-Country-Test.mmdb"),
		filepath.Join(root, "testdata/data/asn/x4bnet-lists_vpn/datacenter-ASN.txt"))
	s := benchServer(tb, "bots-bench.hcl", src, &fakeClock{t: time.Unix(1_800_000_000, 0)})
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(rawReq))); err != nil {
		tb.Fatal(err)
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40000}, nil)
	b := &benchSetup{s: s, st: s.state.Load(), rs: newReqState().(*reqState), ctx: ctx}
	if !s.decide(ctx, b.st, b.rs) {
		tb.Fatal("setup: decide refused the request")
	}
	return b
}

// A desktop Chrome's signup from a Comcast address (residential, in the
// test ASN database) and curl's from a Google address (hosting).
const (
	chromeSignup = "POST /signup HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive\r\nsec-ch-ua: \"Chromium\";v=\"126\"\r\nsec-ch-ua-mobile: ?0\r\nsec-ch-ua-platform: \"Linux\"\r\nUpgrade-Insecure-Requests: 1\r\n" +
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36\r\n" +
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8\r\nSec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-User: ?1\r\nSec-Fetch-Dest: document\r\n" +
		"Accept-Encoding: gzip, deflate, br\r\nAccept-Language: en-US,en;q=0.9\r\nX-Forwarded-For: 73.1.2.3\r\nContent-Length: 0\r\n\r\n"
	curlSignup = "POST /signup HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nX-Forwarded-For: 8.8.8.8\r\nContent-Length: 0\r\n\r\n"
)

// TestBotScoreDecisionPathAllocatesNothing: scoring a request (both
// database lookups, the hosting list, the user agent and the header
// signals) adds no allocation to the decision path.
func TestBotScoreDecisionPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for name, raw := range map[string]string{"chrome": chromeSignup, "curl": curlSignup} {
		bs := newBotsSetup(t, raw)
		if n := testing.AllocsPerRun(200, func() { bs.s.decide(bs.ctx, bs.st, bs.rs) }); n != 0 {
			t.Errorf("%s: the decision path with a bot score allocates %.1f times per request, want 0", name, n)
		}
	}
}

// BenchmarkDecisionPathBotScore is the decision path of newBotsSetup: two
// rules, one needing the score, one keyed on asn and country.
func BenchmarkDecisionPathBotScore(b *testing.B) {
	for name, raw := range map[string]string{"chrome": chromeSignup, "curl": curlSignup} {
		b.Run(name, func(b *testing.B) {
			bs := newBotsSetup(b, raw)
			b.ReportAllocs()
			for b.Loop() {
				bs.s.decide(bs.ctx, bs.st, bs.rs)
			}
		})
	}
}
