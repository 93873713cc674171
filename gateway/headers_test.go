package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// The RateLimit and Retry-After headers through the real server
// (docs/headers.md): on a 429 the binding limit's t equals Retry-After, a
// client that retries then is admitted and a second earlier is not; an
// allowed answer's t is the effective window (its r spent, one more is
// admitted t seconds later and not before); t stays within each
// algorithm's bound. Time is the injected clock; the store is the memory
// store and a real redis-server in caller-clock mode.

// headerPolicy has one ordinary rule per algorithm (a gcra with a burst
// over its limit among them, whose time back to full is three windows), two
// rules on one path, and a count = "attempts" rule beside a tighter one.
const headerPolicy = `
edge {
  upstream         = "http://127.0.0.1:1"
  trusted_proxies  = ["127.0.0.1/32", "::1/128"]
  forwarded_header = "x-forwarded-for"
}
rule "h-gcra" {
  paths     = ["/h/gcra"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 3
  period    = "20s"
}
rule "h-gcra-burst" {
  paths     = ["/h/gcra-burst"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 2
  period    = "10s"
  burst     = 6
}
rule "h-token" {
  paths     = ["/h/token"]
  key       = ["ip"]
  algorithm = "token_bucket"
  limit     = 5
  period    = "7s"
  burst     = 4
}
rule "h-leaky" {
  paths     = ["/h/leaky"]
  key       = ["ip"]
  algorithm = "leaky_bucket"
  limit     = 4
  period    = "9s"
}
rule "h-fixed" {
  paths     = ["/h/fixed"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 3
  period    = "20s"
}
rule "h-sliding" {
  paths     = ["/h/sliding"]
  key       = ["ip"]
  algorithm = "sliding_window"
  limit     = 3
  period    = "20s"
}
rule "h-log" {
  paths     = ["/h/log"]
  key       = ["ip"]
  algorithm = "sliding_log"
  limit     = 3
  period    = "20s"
}
rule "h-two-short" {
  paths     = ["/h/two"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 2
  period    = "10s"
}
rule "h-two-long" {
  paths     = ["/h/two"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 5
  period    = "30s"
}
rule "h-attempts" {
  paths     = ["/h/attempts"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 3
  period    = "30s"
  count     = "attempts"
}
rule "h-attempts-tight" {
  paths     = ["/h/attempts"]
  key       = ["ip"]
  algorithm = "sliding_log"
  limit     = 2
  period    = "15s"
}
`

// headerRoutes are headerPolicy's paths and, per rule, the bound its t and
// Retry-After keep (whole seconds): the emission interval rounded up for
// gcra and the buckets, w for the fixed window and the log, and
// w + ⌈w ÷ limit⌉ for the sliding window counter.
var headerRoutes = []struct {
	path  string
	bound map[string]int64
}{
	{"/h/gcra", map[string]int64{"h-gcra": 7}},
	{"/h/gcra-burst", map[string]int64{"h-gcra-burst": 5}},
	{"/h/token", map[string]int64{"h-token": 2}},
	{"/h/leaky", map[string]int64{"h-leaky": 3}},
	{"/h/fixed", map[string]int64{"h-fixed": 20}},
	{"/h/sliding", map[string]int64{"h-sliding": 27}},
	{"/h/log", map[string]int64{"h-log": 20}},
	{"/h/two", map[string]int64{"h-two-short": 5, "h-two-long": 30}},
	{"/h/attempts", map[string]int64{"h-attempts": 10, "h-attempts-tight": 15}},
}

// headerBase is the tests' start: a multiple of every period above.
var headerBase = time.Unix(1_800_000_000-1_800_000_000%1260, 0)

// headerStores are the stores the header tests run on.
func headerStores(t *testing.T) map[string]func(t *testing.T) rules.Store {
	return map[string]func(t *testing.T) rules.Store{
		"memory": func(t *testing.T) rules.Store {
			st, err := memstore.New(memstore.Options{MaxKeys: 10000})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"redis": func(t *testing.T) rules.Store {
			r := testredis.Start(t)
			st, err := redisstore.New(redisstore.Options{URL: r.URL(), UseCallerClock: true, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// headerNode is an edge on loopback with the given store and the injected
// clock, in front of upstream, or of an origin that answers 200 to
// everything when upstream is empty.
type headerNode struct {
	addr  string
	clock *fakeClock
}

func startHeaderNode(t *testing.T, src string, store rules.Store, upstream string) *headerNode {
	t.Helper()
	p, diags := builtin.Load("headers.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	if upstream == "" {
		origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("ok\n"))
		})}
		oln := listen(t)
		go func() { _ = origin.Serve(oln) }()
		t.Cleanup(func() { origin.Close() })
		upstream = "http://" + oln.Addr().String()
	}
	clk := &fakeClock{t: headerBase}
	srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: store, Upstream: upstream, Clock: clk, KeySecret: []byte("headers test secret, 32 bytes or more")})
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	return &headerNode{addr: ln.Addr().String(), clock: clk}
}

// limits parses a RateLimit or RateLimit-Policy field value as the edge
// writes it ("name";k=v;k=v, ...) into name → parameter → integer.
func limits(t testing.TB, v string) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	if v == "" {
		return out
	}
	for member := range strings.SplitSeq(v, ",") {
		parts := strings.Split(strings.TrimSpace(member), ";")
		name, err := strconv.Unquote(parts[0])
		if err != nil {
			t.Fatalf("member %q of %q: %v", member, v, err)
		}
		params := map[string]int64{}
		for _, p := range parts[1:] {
			k, val, ok := strings.Cut(p, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if !ok || err != nil {
				t.Fatalf("parameter %q of %q", p, v)
			}
			params[k] = n
		}
		out[name] = params
	}
	return out
}

// headerReply is one answer's status and its rate-limit headers parsed.
type headerReply struct {
	status     int
	retryAfter int64 // -1: absent
	policy     map[string]map[string]int64
	limit      map[string]map[string]int64
}

func (n *headerNode) get(t testing.TB, path, client string) headerReply {
	t.Helper()
	r := do(t, "GET", "http://"+n.addr+path, "", "X-Forwarded-For", client)
	h := headerReply{status: r.status, retryAfter: -1, policy: limits(t, r.header.Get("RateLimit-Policy")), limit: limits(t, r.header.Get("RateLimit"))}
	if ra := r.header.Get("Retry-After"); ra != "" {
		v, err := strconv.ParseInt(ra, 10, 64)
		if err != nil || v < 1 {
			t.Fatalf("Retry-After %q: want whole seconds ≥ 1", ra)
		}
		h.retryAfter = v
	}
	return h
}

// TestRetryAfterIsAdmittedThroughTheServer drives every route of
// headerPolicy with a random schedule on the injected clock and checks
// each answer:
//
//   - 429: Retry-After is the longest t of the limits with r=0 and equals
//     the refusing limit's t; the same request a second before it is
//     refused, at it admitted;
//   - 200: every limit's t is within its bound; now and then the client
//     spends each r at once, the request after is refused with
//     Retry-After equal to the smallest-r limit's t, and it is admitted t
//     seconds later and not a second sooner.
func TestRetryAfterIsAdmittedThroughTheServer(t *testing.T) {
	for storeName, newStore := range headerStores(t) {
		t.Run(storeName, func(t *testing.T) {
			n := startHeaderNode(t, headerPolicy, newStore(t), "")
			rng := rand.New(rand.NewPCG(21, 22))
			for ri, route := range headerRoutes {
				t.Run(strings.TrimPrefix(route.path, "/h/"), func(t *testing.T) {
					client := fmt.Sprintf("198.51.100.%d", ri+1)
					refusals, windows := 0, 0
					for step := 0; step < 60 || refusals < 3 || windows < 3; step++ {
						if step > 400 {
							t.Fatalf("after %d steps: %d refusals, %d windows checked", step, refusals, windows)
						}
						switch rng.IntN(4) {
						case 0: // at once
						case 1: // a long pause: counters refill
							n.clock.Advance(time.Duration(rng.Int64N(30_000)) * time.Millisecond)
						default:
							n.clock.Advance(time.Duration(rng.Int64N(4000)) * time.Millisecond)
						}
						h := n.get(t, route.path, client)
						checkHeaders(t, route.bound, h)
						switch {
						case h.status == 429:
							refusals++
							checkRetry(t, n, route.path, client, h.retryAfter)
						case h.status == 200 && rng.IntN(2) == 0:
							windows++
							checkWindow(t, n, route.path, client, h)
						}
					}
				})
			}
		})
	}
}

// checkHeaders checks one answer's headers against the routes' bounds.
func checkHeaders(t *testing.T, bound map[string]int64, h headerReply) {
	t.Helper()
	if len(h.policy) != len(bound) || len(h.limit) != len(bound) {
		t.Fatalf("status %d: got RateLimit-Policy %v and RateLimit %v, want one member per rule of %v", h.status, h.policy, h.limit, bound)
	}
	longest := int64(0)
	for name, b := range bound {
		l, ok := h.limit[name]
		if !ok {
			t.Fatalf("no RateLimit member for %s: %v", name, h.limit)
		}
		if l["t"] < 1 || l["t"] > b || l["t"] > h.policy[name]["w"]+(h.policy[name]["w"]+h.policy[name]["q"]-1)/h.policy[name]["q"] {
			t.Fatalf("%s: t=%d, want 1…%d (policy %v)", name, l["t"], b, h.policy[name])
		}
		if l["r"] == 0 {
			longest = max(longest, l["t"])
		}
	}
	switch {
	case h.status == 429 && h.retryAfter != longest:
		t.Fatalf("429: Retry-After %d, want the longest t of the limits with r=0 (%d): %v", h.retryAfter, longest, h.limit)
	case h.status == 200 && h.retryAfter != -1:
		t.Fatalf("200 with Retry-After %d", h.retryAfter)
	case h.status != 200 && h.status != 429:
		t.Fatalf("status %d", h.status)
	}
}

// checkRetry: a second before Retry-After the request is refused, at it
// admitted. Refused requests change no counter here except the attempts
// rule's, which the refusal a second early may push on: then that refusal's
// own Retry-After is the one to honour, and it must be admitted then.
func checkRetry(t *testing.T, n *headerNode, path, client string, retryAfter int64) {
	t.Helper()
	start := n.clock.Now()
	if retryAfter > 1 {
		n.clock.Set(start.Add(time.Duration(retryAfter-1) * time.Second))
		early := n.get(t, path, client)
		if early.status != 429 {
			t.Fatalf("%s: admitted %ds after a 429 that said Retry-After: %d", path, retryAfter-1, retryAfter)
		}
		if early.retryAfter != 1 {
			// Only a count = "attempts" limit moves while refused.
			if !strings.Contains(path, "attempts") {
				t.Fatalf("%s: a second before Retry-After, Retry-After %d, want 1", path, early.retryAfter)
			}
			start, retryAfter = n.clock.Now(), early.retryAfter
		} else {
			start, retryAfter = n.clock.Now(), 1
		}
	}
	n.clock.Set(start.Add(time.Duration(retryAfter) * time.Second))
	if h := n.get(t, path, client); h.status != 200 {
		t.Fatalf("%s: retried at Retry-After: got %d (RateLimit %v, Retry-After %d)", path, h.status, h.limit, h.retryAfter)
	}
}

// checkWindow spends an allowed answer's smallest r at once, then checks
// that the request after is refused with Retry-After equal to that
// limit's t (the longer when several share the smallest r), refused a
// second before and admitted at it.
func checkWindow(t *testing.T, n *headerNode, path, client string, h headerReply) {
	t.Helper()
	r, tt := int64(-1), int64(0)
	for _, l := range h.limit {
		switch {
		case r < 0 || l["r"] < r:
			r, tt = l["r"], l["t"]
		case l["r"] == r:
			tt = max(tt, l["t"])
		}
	}
	for i := range r {
		if got := n.get(t, path, client); got.status != 200 {
			t.Fatalf("%s: spending r=%d: request %d refused (%v)", path, r, i+1, got.limit)
		}
	}
	after := n.get(t, path, client)
	// An attempts rule spends a unit on this refusal too, and its own wait
	// may then be the longer one (checkHeaders holds Retry-After to it).
	if after.status != 429 || after.retryAfter < tt || (after.retryAfter != tt && !strings.Contains(path, "attempts")) {
		t.Fatalf("%s: r=%d spent: got %d with Retry-After %d, want 429 with the window t=%d", path, r, after.status, after.retryAfter, tt)
	}
	checkRetry(t, n, path, client, after.retryAfter)
}

// TestSlidingWindowHeadersIssue is issue 9's report through the server: a
// sliding_window of 3 per 20s, three requests at a window's start and a
// fourth 4⅔s later answered t=40 and Retry-After: 22. Both are 22 now, and
// the allowed third said t=27 (26⅔s: in the next window, once
// 3×(1−e/20s) + 1 ≤ 3).
func TestSlidingWindowHeadersIssue(t *testing.T) {
	for storeName, newStore := range headerStores(t) {
		t.Run(storeName, func(t *testing.T) {
			n := startHeaderNode(t, headerPolicy, newStore(t), "")
			var h headerReply
			for range 3 {
				h = n.get(t, "/h/sliding", "203.0.113.50")
			}
			if got := h.limit["h-sliding"]; h.status != 200 || got["r"] != 0 || got["t"] != 27 {
				t.Fatalf("third request: got %d %v, want 200 with r=0;t=27", h.status, got)
			}
			n.clock.Advance(4*time.Second + 666_667*time.Microsecond)
			h = n.get(t, "/h/sliding", "203.0.113.50")
			if got := h.limit["h-sliding"]; h.status != 429 || h.retryAfter != 22 || got["t"] != 22 || got["r"] != 0 {
				t.Fatalf("fourth request: got %d, Retry-After %d, RateLimit %v; want 429, 22 and r=0;t=22", h.status, h.retryAfter, got)
			}
			checkRetry(t, n, "/h/sliding", "203.0.113.50", 22)
		})
	}
}

// TestAttemptsRetryAfterCountsItsOwnWait: a count = "attempts" rule spends
// a unit on a request another rule refuses; Retry-After covers its wait
// too, so the retry is admitted by both. The attempts rule allows 3 per 30s
// (one every 10s), the tight one 2 per 15s. Two at 0s pass; the third is
// refused by the tight rule (15s) and spends the attempts rule's last unit.
// At 12s the fourth finds one unit back, spends it, and waits 8s for the
// next, while the tight rule would admit in 3s: Retry-After is 8, and a
// client retrying after 3s would have been refused.
func TestAttemptsRetryAfterCountsItsOwnWait(t *testing.T) {
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := startHeaderNode(t, headerPolicy, st, "")
	const c = "203.0.113.60"
	for range 2 {
		if h := n.get(t, "/h/attempts", c); h.status != 200 {
			t.Fatalf("got %d, want 200", h.status)
		}
	}
	h := n.get(t, "/h/attempts", c)
	if h.status != 429 || h.retryAfter != 15 || h.limit["h-attempts"]["r"] != 0 || h.limit["h-attempts"]["t"] != 10 {
		t.Fatalf("third: got %d, Retry-After %d, %v", h.status, h.retryAfter, h.limit)
	}
	n.clock.Advance(12 * time.Second)
	h = n.get(t, "/h/attempts", c)
	if h.status != 429 || h.retryAfter != 8 || h.limit["h-attempts"]["t"] != 8 || h.limit["h-attempts-tight"]["t"] != 3 {
		t.Fatalf("fourth: got %d, Retry-After %d, %v; want 429, 8, attempts t=8 and tight t=3", h.status, h.retryAfter, h.limit)
	}
	checkRetry(t, n, "/h/attempts", c, h.retryAfter)
}

// cacheHeaderCases: which origin answers a shared cache may store, and so
// get no RateLimit headers (sharedStorable, docs/headers.md).
var cacheHeaderCases = []struct {
	name    string
	headers []string // name, value pairs, in order; a name may repeat
	shared  bool
}{
	{"no cache headers", nil, false},
	{"public", []string{"Cache-Control", "public"}, true},
	{"s-maxage", []string{"Cache-Control", "s-maxage=60"}, true},
	{"max-age", []string{"Cache-Control", "max-age=60"}, true},
	{"max-age quoted", []string{"Cache-Control", `max-age="60"`}, true},
	{"max-age=0", []string{"Cache-Control", "max-age=0"}, true},
	{"upper case", []string{"Cache-Control", "PUBLIC, MAX-AGE=60"}, true},
	{"Expires", []string{"Expires", "Thu, 01 Jan 2099 00:00:00 GMT"}, true},
	{"Expires invalid", []string{"Expires", "0"}, true},
	{"private", []string{"Cache-Control", "private, max-age=60"}, false},
	{"Private upper case", []string{"Cache-Control", "max-age=60, PRIVATE"}, false},
	{"no-store", []string{"Cache-Control", "no-store, max-age=60"}, false},
	{"no-store with Expires", []string{"Cache-Control", "no-store", "Expires", "Thu, 01 Jan 2099 00:00:00 GMT"}, false},
	{"private with s-maxage", []string{"Cache-Control", "private, s-maxage=60"}, false},
	{"no-cache alone", []string{"Cache-Control", "no-cache"}, false},
	{"no-cache with max-age", []string{"Cache-Control", "no-cache, max-age=60"}, true},
	{"two lines, private in the second", []string{"Cache-Control", "max-age=60", "Cache-Control", "private"}, false},
	{"two lines, max-age in the second", []string{"Cache-Control", "no-cache", "Cache-Control", "max-age=60"}, true},
	{"qualified private", []string{"Cache-Control", `private="Set-Cookie", max-age=60`}, true},
	{"private inside a quoted argument", []string{"Cache-Control", `no-cache="X-A, private", max-age=60`}, true},
	{"no-store inside a quoted argument", []string{"Cache-Control", `public, community="no-store"`}, true},
	{"escaped quote", []string{"Cache-Control", `ext="a\", private", s-maxage=5`}, true},
	{"no-store with an argument", []string{"Cache-Control", "no-store=1, max-age=60"}, true},
	{"whitespace", []string{"Cache-Control", "  private  ,max-age=60 "}, false},
	{"Vary does not help", []string{"Cache-Control", "public", "Vary", "X-Forwarded-For"}, true},
	{"CDN-Cache-Control", []string{"Cache-Control", "private", "CDN-Cache-Control", "max-age=60"}, true},
	{"CDN-Cache-Control no-store", []string{"CDN-Cache-Control", "no-store"}, false},
	{"Surrogate-Control", []string{"Surrogate-Control", "max-age=60"}, true},
	{"X-Accel-Expires", []string{"Cache-Control", "private", "X-Accel-Expires", "60"}, true},
	{"X-Accel-Expires 0", []string{"X-Accel-Expires", "0"}, false},
}

func TestSharedStorable(t *testing.T) {
	for _, tt := range cacheHeaderCases {
		t.Run(tt.name, func(t *testing.T) {
			var h fasthttp.ResponseHeader
			for i := 0; i+1 < len(tt.headers); i += 2 {
				h.Add(tt.headers[i], tt.headers[i+1])
			}
			if got := sharedStorable(&h); got != tt.shared {
				t.Errorf("got %v, want %v", got, tt.shared)
			}
		})
	}
}

// TestCacheableAnswersGetNoRateLimit: through the real server, an origin
// answer a shared cache may store gets no RateLimit headers (the origin's
// own header lines as sent, spelling and repeats included); any other
// gets them; the edge's own 429 is no-store and keeps them.
func TestCacheableAnswersGetNoRateLimit(t *testing.T) {
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("case"))
		hs := cacheHeaderCases[i].headers
		for j := 0; j+1 < len(hs); j += 2 {
			// Header names as sent, not canonicalised.
			w.Header()[strings.ToLower(hs[j])] = append(w.Header()[strings.ToLower(hs[j])], hs[j+1])
		}
		if r.URL.Query().Has("not-modified") {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})}
	oln := listen(t)
	go func() { _ = origin.Serve(oln) }()
	t.Cleanup(func() { origin.Close() })
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := startHeaderNode(t, headerPolicy, st, "http://"+oln.Addr().String())
	for i, tt := range cacheHeaderCases {
		r := do(t, "GET", fmt.Sprintf("http://%s/h/fixed?case=%d", n.addr, i), "", "X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i+1))
		has := r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != ""
		if r.status != 200 || has == tt.shared {
			t.Errorf("%s: got %d, RateLimit %q, RateLimit-Policy %q; want them only when no shared cache may store it", tt.name, r.status, r.header.Get("RateLimit"), r.header.Get("RateLimit-Policy"))
		}
	}
	// A 304 updates the stored answer's fields (RFC 9111 §4.3.4): the same
	// test on its own fields (cases 0: none, 3: max-age).
	for _, c := range []struct {
		i      int
		shared bool
	}{{0, false}, {3, true}} {
		r := do(t, "GET", fmt.Sprintf("http://%s/h/fixed?case=%d&not-modified", n.addr, c.i), "", "X-Forwarded-For", "192.0.2.100")
		if has := r.header.Get("RateLimit") != ""; r.status != 304 || has == c.shared {
			t.Errorf("304 with %v: got %d, RateLimit %q", cacheHeaderCases[c.i].headers, r.status, r.header.Get("RateLimit"))
		}
	}
	// The edge's own refusal: no-store, informative.
	var r reply
	for range 4 {
		r = do(t, "GET", fmt.Sprintf("http://%s/h/fixed?case=1", n.addr), "", "X-Forwarded-For", "192.0.2.200")
	}
	if r.status != 429 || r.header.Get("Cache-Control") != "no-store" || r.header.Get("RateLimit") == "" {
		t.Errorf("the edge's 429: got %d, Cache-Control %q, RateLimit %q", r.status, r.header.Get("Cache-Control"), r.header.Get("RateLimit"))
	}
}

// TestStoreFallbackHasNoRateLimitMember: a rule the store could not decide
// keeps its RateLimit-Policy member and has no RateLimit member (its
// counter's state is unknown); the others keep theirs.
func TestStoreFallbackHasNoRateLimitMember(t *testing.T) {
	bs := newBenchSetup(t, "10.1.2.3", "203.0.113.9, 10.0.0.2")
	bs.rs.sc.Res[bs.rs.sc.Matches[0].Op].StoreError = true
	bs.s.setRateLimitHeaders(bs.ctx, bs.rs)
	var h fasthttp.ResponseHeader
	bs.ctx.Response.Header.CopyTo(&h)
	all := string(h.Header())
	policy, limit := "", ""
	for line := range strings.SplitSeq(all, "\r\n") {
		if v, ok := strings.CutPrefix(line, "RateLimit-Policy: "); ok {
			policy = v
		} else if v, ok := strings.CutPrefix(line, "RateLimit: "); ok {
			limit = v
		}
	}
	first := bs.rs.sc.Matches[0].Rule.Name
	if _, ok := limits(t, policy)[first]; !ok {
		t.Errorf("RateLimit-Policy %q lacks %s", policy, first)
	}
	got := limits(t, limit)
	if _, ok := got[first]; ok || len(got) != 3 {
		t.Errorf("RateLimit %q: want the three other enforcing rules, not %s", limit, first)
	}
}

// TestHeaderStepAllocatesNothing: deciding whether the answer is
// shareable and rendering RateLimit-Policy, RateLimit and Retry-After stay
// allocation-free, as the decision path is (gateway/alloc_test.go).
func TestHeaderStepAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	bs := newBenchSetup(t, "10.1.2.3", "203.0.113.9, 10.0.0.2")
	ctx := bs.ctx
	ctx.Response.Header.Set("Cache-Control", `no-cache="X-A, private", must-revalidate`)
	ctx.Response.Header.Add("Cache-Control", "no-transform")
	ctx.Response.Header.Set("Vary", "Accept-Encoding")
	n := testing.AllocsPerRun(200, func() {
		if !sharedStorable(&ctx.Response.Header) {
			bs.s.setRateLimitHeaders(ctx, bs.rs)
		}
		_ = retryAfter(bs.rs, &bs.rs.d)
	})
	if n != 0 {
		t.Errorf("the header step allocates %.1f times per answer, want 0", n)
	}
	if !strings.Contains(ctx.Response.Header.String(), "\r\nRateLimit: ") {
		t.Error("no RateLimit header was set")
	}
}

// TestCacheableAnswersGetNoVisitorCookie: through the real server, a new
// visitor's Set-Cookie never goes on an answer a shared cache may store (the
// cache would hand one visitor ID to every client it serves); the same
// client is offered its cookie on the next answer no cache may store.
func TestCacheableAnswersGetNoVisitorCookie(t *testing.T) {
	t.Setenv("EDGE_VISITOR_SECRETS", "cacheable-visitor-secret-0123456789abcdef")
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("cacheable") {
			w.Header().Set("Cache-Control", "public, max-age=60")
		}
		_, _ = w.Write([]byte("ok\n"))
	})}
	oln := listen(t)
	go func() { _ = origin.Serve(oln) }()
	t.Cleanup(func() { origin.Close() })
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	src := headerPolicy + `
visitor {
  mint_limit = 10
  secure     = false
}
`
	n := startHeaderNode(t, src, st, "http://"+oln.Addr().String())
	r := do(t, "GET", "http://"+n.addr+"/h/fixed?cacheable", "", "X-Forwarded-For", "192.0.2.77")
	if r.status != 200 || r.header.Get("Set-Cookie") != "" {
		t.Errorf("cacheable answer: got %d, Set-Cookie %q; want 200 and none", r.status, r.header.Get("Set-Cookie"))
	}
	r = do(t, "GET", "http://"+n.addr+"/h/fixed", "", "X-Forwarded-For", "192.0.2.77")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Set-Cookie"), "__edge_vid=") {
		t.Errorf("uncacheable answer: got %d, Set-Cookie %q; want 200 and a visitor cookie", r.status, r.header.Get("Set-Cookie"))
	}
}
