package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/valyala/fasthttp"
)

// The mixed scenario (issue 16): a blend of the traffic an edge node in
// front of a login service sees, API calls, logins, signups and OTP
// sends and verifies, from many IPv4 and IPv6 clients, with a tenth of it
// from a few attackers stuffing credentials and pumping texts; in a closed
// or an open loop, as plain. It is meant for the shipped policies.hcl in
// front of the demo origin (routes as in demo/doc.go), and measures what
// the whole policy costs on such a blend. The statuses depend on the rate
// against the policy's limits: at a benchmark's rate every client sends
// far more than a person would, so the sensitive routes refuse most of it;
// an open loop at a modest -rate over many -clients is closer to a real
// day. The report gives each kind's statuses and latencies, and the share
// of legitimate and of attacking requests refused.

// mixKind is one kind of request in the blend.
type mixKind struct {
	name     string
	weight   int  // share of the blend, in percent
	attacker bool // sent from an attacking address
	method   string
	path     string
	apiKey   bool // carries X-Api-Key (with -api-keys)
	// body writes the JSON body of request n whose hash is h, from
	// client c (an index among the legitimate or attacking clients).
	body func(b io.Writer, n int64, h uint64, c int)
}

// mixPassword is the password the demo origin accepts (demo/origin.go).
const mixPassword = "letmein-demo"

// mixKinds is the blend; the weights sum to 100.
var mixKinds = []mixKind{
	{name: "api-read", weight: 44, method: "GET", path: "/api/items", apiKey: true},
	{name: "api-write", weight: 10, method: "POST", path: "/api/orders", apiKey: true, body: func(b io.Writer, n int64, h uint64, c int) {
		fmt.Fprintf(b, `{"item":"sku-%d","quantity":%d}`, h%5000, 1+h%4)
	}},
	{name: "login", weight: 18, method: "POST", path: "/login", body: func(b io.Writer, n int64, h uint64, c int) {
		pw := mixPassword
		if h%5 == 0 { // one in five people mistype it
			pw = "letmein-dem0"
		}
		fmt.Fprintf(b, `{"username":"user%d@example.com","password":%q}`, c, pw)
	}},
	{name: "signup", weight: 4, method: "POST", path: "/signup", body: func(b io.Writer, n int64, h uint64, c int) {
		fmt.Fprintf(b, `{"username":"new%d@example.com","password":"a-long-passphrase-%d"}`, n, h%1000)
	}},
	{name: "otp-send", weight: 6, method: "POST", path: "/otp/send", body: func(b io.Writer, n int64, h uint64, c int) {
		fmt.Fprintf(b, `{"phone":%q}`, mixPhone(c))
	}},
	{name: "otp-verify", weight: 6, method: "POST", path: "/otp/verify", body: func(b io.Writer, n int64, h uint64, c int) {
		fmt.Fprintf(b, `{"phone":%q,"challenge_id":"ch-%d-%d","code":"%06d"}`, mixPhone(c), c, h%4, h%1_000_000)
	}},
	{name: "stuffing", weight: 8, attacker: true, method: "POST", path: "/login", body: func(b io.Writer, n int64, h uint64, c int) {
		fmt.Fprintf(b, `{"username":"victim%d@example.com","password":"guess-%d"}`, h%1_000_000, h>>40)
	}},
	{name: "pumping", weight: 4, attacker: true, method: "POST", path: "/otp/send", body: func(b io.Writer, n int64, h uint64, c int) {
		fmt.Fprintf(b, `{"phone":%q}`, mixPhone(int(h>>8)))
	}},
}

// mixAreaCodes are US area codes; mixPhone numbers are in their
// 555-0100 … 555-0199 blocks, which are reserved for fiction.
var mixAreaCodes = [...]string{"201", "202", "203", "205", "206", "207", "208", "209", "210", "212",
	"213", "214", "215", "216", "217", "218", "219", "224", "225", "228"}

// mixPhone returns phone i of 2000 fictional numbers in E.164, 100 per
// numbering block.
func mixPhone(i int) string {
	i %= 100 * len(mixAreaCodes)
	return fmt.Sprintf("+1%s55501%02d", mixAreaCodes[i/100], i%100)
}

// mixTable maps a hash's percentile to a kind.
var mixTable = func() [100]uint8 {
	var t [100]uint8
	i := 0
	for k, m := range mixKinds {
		for range m.weight {
			t[i] = uint8(k)
			i++
		}
	}
	if i != 100 {
		panic("mixKinds weights do not sum to 100")
	}
	return t
}()

// splitmix64 is a bijective mix of x (SplitMix64's finaliser): request
// n's kind, client and values are functions of n alone, so every run
// sends the same blend.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// mixKindOf returns request n's kind.
func mixKindOf(n int64) int { return int(mixTable[splitmix64(uint64(n))%100]) }

// mixClients returns the legitimate clients' addresses, three in four
// IPv4 (client i is address i of 198.18.0.0/15) and every fourth IPv6
// (client i in 2001:db8:X:Y::/64 of its own, X:Y being i), and the
// attackers', alternately IPv4 from 203.0.113.0/24 and IPv6 from
// 2001:db8:ffff::/48, one /64 each: every range is for documentation or
// benchmarking (RFC 2544, 3849, 5737), none a real client's.
func mixClients(clients, attackers int) (legit, attack []string) {
	legit = make([]string, clients)
	for i := range legit {
		if i%4 == 3 {
			legit[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i >> 16), byte(i >> 8), byte(i), 15: 1}).String()
		} else {
			legit[i] = clientAddr(i).String()
		}
	}
	attack = make([]string, attackers)
	for j := range attack {
		if j%2 == 0 {
			attack[j] = netip.AddrFrom4([4]byte{203, 0, 113, byte(j / 2)}).String()
		} else {
			attack[j] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, byte(j >> 9), byte(j >> 1), 15: 1}).String()
		}
	}
	return legit, attack
}

// runMixed is the mixed scenario.
func runMixed(ctx context.Context, cfg config) error {
	legit, attack := mixClients(cfg.clients, cfg.gen.attackers)
	var keys []string
	for i := range cfg.gen.apiKeys {
		keys = append(keys, "mix-key-"+strconv.Itoa(i))
	}
	base := cfg.target.base
	build := func(n int64, req *fasthttp.Request) {
		if n < 0 {
			return
		}
		h := splitmix64(uint64(n))
		k := &mixKinds[mixTable[h%100]]
		req.Reset()
		req.SetRequestURI(base + k.path)
		req.Header.SetMethod(k.method)
		var c int
		var addr string
		if k.attacker {
			c = int(h >> 32 % uint64(len(attack)))
			addr = attack[c]
		} else {
			c = int(h >> 32 % uint64(len(legit)))
			addr = legit[c]
		}
		req.Header.Set("X-Forwarded-For", addr)
		if k.apiKey && len(keys) > 0 {
			req.Header.Set("X-Api-Key", keys[c%len(keys)])
		}
		if k.body != nil {
			req.Header.SetContentType("application/json")
			k.body(req.BodyWriter(), n, h>>8, c)
		}
	}
	res, dials, err := runGen(ctx, cfg, genSpecOf(cfg, len(mixKinds), mixKindOf), build)
	if err != nil {
		return err
	}
	h := genHeader{scenario: "mixed", what: fmt.Sprintf("a blend of %d kinds, a quarter of the clients IPv6, %d attacking addresses", len(mixKinds), cfg.gen.attackers), cfg: cfg}
	var b strings.Builder
	h.write(&b, res, dials)
	if err := writeMixTable(&b, res); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	writeResultLine(&b, h, res)
	if _, err := io.WriteString(cfg.stdout, b.String()); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// writeMixTable appends one row per kind (its requests, 2xx, 4xx but 429,
// 429, other answers, errors, p50 and p99) and the share of legitimate
// and attacking requests refused with 429.
func writeMixTable(b *strings.Builder, res *genResult) error {
	fmt.Fprintln(b, "\nper kind:")
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tshare\trequests\t2xx\t4xx\t429\tother\terrors\tp50 ms\tp99 ms\t")
	var sides [2]struct{ requests, refused int64 } // legitimate, attacking
	for i, k := range mixKinds {
		t := &res.kinds[i]
		var total, ok, c4xx, other int64
		for c, n := range t.statuses {
			total += n
			switch {
			case c >= 200 && c < 300:
				ok += n
			case c == 429:
			case c >= 400 && c < 500:
				c4xx += n
			default:
				other += n
			}
		}
		total += t.errs
		side := 0
		if k.attacker {
			side = 1
		}
		sides[side].requests += total
		sides[side].refused += t.statuses[429]
		p50, p99 := "-", "-"
		if t.hist.TotalCount() > 0 {
			p50, p99 = fmtMS(t.hist.ValueAtQuantile(50)), fmtMS(t.hist.ValueAtQuantile(99))
		}
		fmt.Fprintf(tw, "%s\t%d%%\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", k.name, k.weight, total, ok, c4xx, t.statuses[429], other, t.errs, p50, p99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(table.String()) {
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteByte('\n')
	}
	for i, name := range []string{"legitimate", "attacking"} {
		s := sides[i]
		fmt.Fprintf(b, "%-11s %d requests, %d refused with 429 (%s)\n", name, s.requests, s.refused, fmtShare(s.refused, s.requests))
	}
	return nil
}
