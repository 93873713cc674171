package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"
)

// Attack classes on who the client is: IPv6 rotation, forwarding-header
// spoofing and IPv4 addresses embedded in IPv6 ones.

// Requests per case.
const (
	rotation64Requests = 20  // within one /64: over its per-visitor burst
	rotation56Requests = 150 // from 150 /64s of one /56: over the per-/48 limit
	rotation48Requests = 30  // signups from 30 /56s of one /48: over its per-/48 limit
	spoofRequests      = 12  // per spoofing case
	embeddedNative     = 12  // per embedded-IPv4 case, first from the IPv4 /24 itself
	embeddedEmbedded   = 12  // then from as many IPv6 spellings of its hosts
)

func ipv6RotationRequests(*attackRun) int64 {
	return rotation64Requests + rotation56Requests + rotation48Requests
}

// runIPv6Rotation: an IPv6 host picks its own interface ID, and a site its
// own /64s, so a client that rotates them must still be one client (the
// policy's ipv6_prefix) and one network (a rule's ipv6_prefix). Each case
// plays a known and a fresh browser behind one of the attacker's /64s and
// a fresh neighbour elsewhere in its /48: the per-network rules hold the
// fresh ones with the attacker (issue 24, harm e), never the known one.
func runIPv6Rotation(a *attackRun) error {
	// Within one /64: a new interface ID on every guess at one account.
	site := a.v6Site()
	s56, s64 := byte(a.rng.Uint32()), byte(a.rng.Uint32())
	victim := a.account("victim")
	cs, err := a.castAround(v6In(site, s56, s64, a.rng.Uint64()|1), v6In(site, s56^0x80, s64, a.rng.Uint64()|1), actLogin, actLogin)
	if err != nil {
		return err
	}
	if err := a.loginCase("ipv6-rotation", "within-a-64", rotation64Requests, func(i int) netip.Addr {
		return v6In(site, s56, s64, a.rng.Uint64()|1)
	}, func(int) string { return victim }, "/login", cs); err != nil {
		return err
	}
	// Across one /56: every login from a /64 of its own, spraying a new
	// account each time, so that only the per-network rule holds them
	// (one account would be held by login-failures-account's 50 first).
	site = a.v6Site()
	s56 = byte(a.rng.Uint32())
	if cs, err = a.castAround(v6In(site, s56, 0, a.rng.Uint64()|1), v6In(site, s56^0x80, 0, a.rng.Uint64()|1), actLogin, actLogin); err != nil {
		return err
	}
	if err := a.loginCase("ipv6-rotation", "across-a-56", rotation56Requests, func(i int) netip.Addr {
		return v6In(site, s56, byte(i), a.rng.Uint64()|1)
	}, a.sprayed, "/login", cs); err != nil {
		return err
	}
	// Across one /48, for the per-network rules: every signup from a /56
	// of its own. The known browser logs in (it has its account); the
	// fresh ones sign up.
	site = a.v6Site()
	first := v6In(site, 0, byte(a.rng.Uint32()), a.rng.Uint64()|1)
	if cs, err = a.castAround(first, v6In(site, 0xc8, 0, a.rng.Uint64()|1), actLogin, actSignup); err != nil {
		return err
	}
	return a.simpleCase("ipv6-rotation", "signup-across-a-48", rotation48Requests, func(i int) (*rawRequest, canonReq) {
		client := first
		if i > 0 {
			client = v6In(site, byte(i), byte(a.rng.Uint32()), a.rng.Uint64()|1)
		}
		return a.signup(client, client)
	}, cs)
}

// castAround is the usual cast of a case whose attacker is at client: a
// known browser behind it acting on knownActs, a fresh one behind it and a
// fresh neighbour at other (elsewhere in the attacker's network; invalid
// for none) acting on freshActs. A browser behind client shares its
// address at the policy's client prefix: another interface ID in an IPv6
// /64, the IPv4 address itself.
func (a *attackRun) castAround(client, other netip.Addr, knownActs, freshActs act) (*cast, error) {
	behind := client
	if client.Is6() && !client.Is4In6() {
		behind = v6In(netip.PrefixFrom(client, 48), client.As16()[6], client.As16()[7], a.rng.Uint64()|1)
	}
	k, err := a.knownAt(behind, netip.Addr{}, knownActs)
	if err != nil {
		return nil, err
	}
	f, err := a.freshAt(freshBehind, behind, netip.Addr{}, freshActs)
	if err != nil {
		return nil, err
	}
	bs := []*bystander{k, f}
	if other.IsValid() {
		n, err := a.freshAt(neighbour, other, netip.Addr{}, freshActs)
		if err != nil {
			return nil, err
		}
		bs = append(bs, n)
	}
	return a.newCast(bs...)
}

// loginCase sends n logins to target, login i from client(i) on
// account(i), counts what reached the origin, then plays the cast.
func (a *attackRun) loginCase(class, name string, n int, client func(i int) netip.Addr, account func(i int) string, target string, cs *cast) error {
	return a.simpleCase(class, name, n, func(i int) (*rawRequest, canonReq) {
		c := client(i)
		r, f := a.loginRequest(fasthttp.MethodPost, target, account(i), i)
		a.clientHeader(r, c)
		return r, a.loginCanon(c, f)
	}, cs)
}

// simpleCase sends n requests built by mk on one connection, counts every
// request that reached the origin as the attacker's gain, then plays the
// cast.
func (a *attackRun) simpleCase(class, name string, n int, mk func(i int) (*rawRequest, canonReq), cs *cast) error {
	tc, err := a.begin(class, name)
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	for i := range n {
		r, canon := mk(i)
		if _, err := tc.send(c, r, canon); err != nil {
			return err
		}
	}
	return tc.end(cs, nil, "")
}

// sprayed is a password sprayer's account for login i: a new one each
// time.
func (a *attackRun) sprayed(int) string { return a.account("sprayed") }

// signup is POST /signup from client (named in the forwarding header),
// which the policy counts as counted, for a new inbox each time: the
// attacker opens many accounts, one per address, so that only the
// per-network rule holds them.
func (a *attackRun) signup(client, counted netip.Addr) (*rawRequest, canonReq) {
	e := a.email()
	return a.signupAs(client, counted, e, e)
}

// signupAs is POST /signup from client for the email address sent, which
// the origin's identity provider reads as canonical.
func (a *attackRun) signupAs(client, counted netip.Addr, sent, canonical string) (*rawRequest, canonReq) {
	r := a.request(fasthttp.MethodPost, "/signup")
	a.clientHeader(r, client)
	r.add("Content-Type", "application/json")
	r.body = jsonBody(map[string]string{"email": sent})
	return r, canonReq{method: fasthttp.MethodPost, path: "/signup", host: a.p.host, client: a.m.counted(counted), fields: map[string]string{"email": canonical}}
}

// clientIPHeaderSpellings are headers that origins (or the frameworks and
// CDNs in front of them) read as the client's address; "_" spellings
// (and PHP's "." ones) are the same header to CGI, PHP and WSGI origins.
var clientIPHeaderSpellings = []string{
	"X-Real-IP", "True-Client-IP", "CF-Connecting-IP", "X-Client-IP",
	"X-Cluster-Client-IP", "Fastly-Client-IP", "X-Original-Forwarded-For",
	"X_Forwarded_For", "X_Real_IP", "x_forwarded_for", "X.Forwarded.For",
}

func spoofingRequests(*attackRun) int64 {
	return int64(spoofRequests * (5 + len(clientIPHeaderSpellings) + 3))
}

// spoofCase is one way of naming a client that is not the one the policy
// counts.
type spoofCase struct {
	name string
	// headers returns the request's client headers for the spoofed
	// address s and the real client c (the trusted-proxy cases) or the
	// peer (the untrusted ones, where c is invalid).
	headers func(s, c netip.Addr) []header
}

// runSpoofing: the counted client is the right-most address of the one
// forwarding header the policy names that is not a trusted proxy, when the
// peer is a trusted proxy, and the peer otherwise (docs/client-address.md).
// Every
// case rotates a spoofed address on every login while the real client
// stays; a gain over the one client's bound means the edge counted a
// spoofed one. And no spoofed address may reach the origin, in any header
// (docs/host-and-path.md §5): the last line counts those that did.
func runSpoofing(a *attackRun) error {
	kind := a.m.p.ForwardedHeader
	other := "Forwarded"
	if strings.EqualFold(kind, "Forwarded") {
		other = "X-Forwarded-For"
	}
	elem := func(x netip.Addr) string { _, v := forwardingHeader(kind, x); return v }
	otherElem := func(x netip.Addr) string { _, v := forwardingHeader(other, x); return v }
	trusted := []spoofCase{
		{"chain-left", func(s, c netip.Addr) []header { return []header{{kind, elem(s) + ", " + elem(c)}} }},
		{"chain-two-lines", func(s, c netip.Addr) []header { return []header{{kind, elem(s)}, {kind, elem(c)}} }},
		{"chain-two-lines-lower-case", func(s, c netip.Addr) []header {
			return []header{{strings.ToLower(kind), elem(s)}, {kind, elem(c)}}
		}},
		{"chain-trusted-hop", func(s, c netip.Addr) []header {
			return []header{{kind, elem(s) + ", " + elem(c) + ", " + elem(netip.MustParseAddr("127.0.0.1"))}}
		}},
		{"other-forwarding-header", func(s, c netip.Addr) []header { return []header{{kind, elem(c)}, {other, otherElem(s)}} }},
	}
	for _, h := range clientIPHeaderSpellings {
		trusted = append(trusted, spoofCase{"header-" + h, func(s, c netip.Addr) []header {
			return []header{{h, s.String()}, {kind, elem(c)}}
		}})
	}
	untrusted := []spoofCase{
		{"untrusted-peer-x-forwarded-for", func(s, _ netip.Addr) []header { return []header{{"X-Forwarded-For", s.String()}} }},
		{"untrusted-peer-forwarded", func(s, _ netip.Addr) []header { return []header{{"Forwarded", otherElemFor(s)}} }},
		{"untrusted-peer-every-header", func(s, _ netip.Addr) []header {
			hs := []header{{"X-Forwarded-For", s.String()}, {"Forwarded", otherElemFor(s)}}
			for _, h := range clientIPHeaderSpellings {
				hs = append(hs, header{h, s.String()})
			}
			return hs
		}},
	}

	leak := &leakTally{}
	for _, sc := range trusted {
		if err := a.spoofCase(sc, netip.Addr{}, leak); err != nil {
			return err
		}
	}
	for _, sc := range untrusted {
		peer, ok := a.untrustedPeer()
		if !ok {
			a.skip("spoofing", sc.name, "no untrusted loopback address to connect from (the target is not on 127.0.0.0/8, or the policy trusts all of it)")
			continue
		}
		if err := a.spoofCase(sc, peer, leak); err != nil {
			return err
		}
	}
	r := caseResult{
		name:  "spoofing/spoofed-address-reached-origin",
		sent:  leak.forwarded,
		gain:  leak.leaked,
		bound: caseBoundResult{0, "the edge rewrites X-Forwarded-For and drops every client-IP header in any spelling (docs/host-and-path.md §5): no spoofed address reaches the origin"},
		note:  "forwarded requests of the spoofing cases whose spoofed address the origin received",
	}
	if len(leak.where) > 0 {
		r.note += " (" + strings.Join(leak.where, "; ") + ")"
	}
	r.coll.lines = []string{"the users whose addresses were spoofed are played in each spoofing case"}
	a.results = append(a.results, r)
	writeAttackLine(a.out, &r)
	fmt.Fprintf(a.out, "    %d forwarded requests checked; gain: %s\n", r.sent, r.note)
	writeCollateral(a.out, &r)
	return nil
}

// otherElemFor is a Forwarded element naming s.
func otherElemFor(s netip.Addr) string { _, v := forwardingHeader("Forwarded", s); return v }

// leakTally counts forwarded requests whose spoofed address the origin
// received.
type leakTally struct {
	forwarded, leaked int64
	where             []string // "case: header"
}

// spoofCase runs one spoofing case: spoofRequests logins, each naming a
// new spoofed address, from one real client (peer invalid: this tool as
// a trusted proxy names a new client of its own) or from the untrusted
// peer itself. Every third names instead the address of a real user, known
// (it logged in there before) and fresh: a user whose address the
// attacker spoofs, played after the case (bound 0: the policy never
// counts a spoofed address, so nothing the attacker sends under it can
// cost its owner).
func (a *attackRun) spoofCase(sc spoofCase, peer netip.Addr, leak *leakTally) error {
	user := a.v6Client()
	k, err := a.knownAt(user, netip.Addr{}, actLogin)
	if err != nil {
		return err
	}
	f, err := a.freshAt(freshBehind, user, netip.Addr{}, actLogin)
	if err != nil {
		return err
	}
	tc, cs, err := a.beginCast("spoofing", sc.name, k, f)
	if err != nil {
		return err
	}
	c := a.conn(peer)
	defer c.close()
	client := peer
	if !peer.IsValid() {
		client = a.v6Client()
	}
	// One guesser at one account, hiding behind a new address each time.
	victim := a.account("victim")
	var reached int64
	for i := range spoofRequests {
		s := a.spoofAddr(i)
		if i%3 == 2 {
			s = user
		}
		r, f := a.loginRequest(fasthttp.MethodPost, "/login", victim, i)
		r.headers = append(r.headers, sc.headers(s, client)...)
		_, got, ok, err := tc.sendTagged(c, r, a.loginCanon(client, f))
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		reached++
		leak.forwarded++
		if h := headerNaming(got, s); h != "" {
			leak.leaked++
			leak.where = append(leak.where, sc.name+": "+h)
		}
	}
	if err := tc.checkReached(reached); err != nil {
		return err
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	tc.finish(reached, "")
	return nil
}

// checkReached checks the origin's count against the tagged requests the
// case saw arrive.
func (tc *tcase) checkReached(tagged int64) error {
	n, err := tc.reachedAll(nil)
	if err != nil {
		return err
	}
	if n != tagged {
		return fmt.Errorf("%s: the origin counted %d requests but saw %d of the case's tags: other traffic reached it; run again on a quiet node", tc.res.name, n, tagged)
	}
	return nil
}

// spoofAddr returns the i-th spoofed address of a case: a new IPv6 /48 or
// a new IPv4 address, alternately, so that an edge that counted it would
// give each its own budget.
func (a *attackRun) spoofAddr(i int) netip.Addr {
	if i%2 == 0 {
		return v6In(netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(a.rng.Uint32()), byte(a.rng.Uint32())}), 48), 0, 0, a.rng.Uint64()|1)
	}
	x := a.rng.Uint32()
	return netip.AddrFrom4([4]byte{203, 0, 113, byte(x)}) // 203.0.113.0/24 (RFC 5737)
}

// headerNaming returns the name of a header the origin received that
// names addr (as an address token: "for=", brackets and quotes aside), ""
// for none.
func headerNaming(req originRequest, addr netip.Addr) string {
	s := addr.String()
	for name, v := range req.Headers {
		if headerNamesMatch(name, attackTagHeader) {
			continue
		}
		for i := 0; ; {
			j := strings.Index(v[i:], s)
			if j < 0 {
				break
			}
			j += i
			end := j + len(s)
			if (j == 0 || !addrByte(v[j-1])) && (end == len(v) || !addrByte(v[end])) {
				return name
			}
			i = j + 1
		}
	}
	return ""
}

// addrByte reports whether c can continue an address literal.
func addrByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '.' || c == ':'
}

func embeddedIPv4Requests(*attackRun) int64 {
	return int64(len(embeddedForms) * (embeddedNative + embeddedEmbedded))
}

// embeddedForm spells IPv4 host v as an IPv6 address; i varies the bits
// the IPv4 address does not depend on, as an attacker would.
type embeddedForm struct {
	name  string
	spell func(v netip.Addr, i int) netip.Addr
}

var embeddedForms = []embeddedForm{
	{"native", func(v netip.Addr, _ int) netip.Addr { return v }},
	{"ipv4-mapped", func(v netip.Addr, _ int) netip.Addr { return netip.AddrFrom16(v.As16()) }},
	{"6to4", sixToFour},
	{"nat64-well-known", nat64WellKnown},
	{"teredo", teredo},
	{"ipv4-compatible", ipv4Compatible},
}

// sixToFour is 2002:V4ADDR:SUBNET::IID (RFC 3056 §2): the site of IPv4
// host v, with subnet i and interface ID i+1.
func sixToFour(v netip.Addr, i int) netip.Addr {
	b4 := v.As4()
	var b [16]byte
	b[0], b[1] = 0x20, 0x02
	copy(b[2:6], b4[:])
	b[6], b[7] = byte(i>>8), byte(i)
	b[15] = byte(i + 1)
	return netip.AddrFrom16(b)
}

// nat64WellKnown is 64:ff9b::V4ADDR (RFC 6052 §2.1).
func nat64WellKnown(v netip.Addr, _ int) netip.Addr {
	b4 := v.As4()
	b := [16]byte{0x00, 0x64, 0xff, 0x9b}
	copy(b[12:], b4[:])
	return netip.AddrFrom16(b)
}

// teredo is 2001:0:SERVER:FLAGS:PORT:CLIENT (RFC 4380 §4), the client's
// IPv4 address and port stored inverted; i picks the server (its first two
// octets, so each lands in a /48 of its own) and the port.
func teredo(v netip.Addr, i int) netip.Addr {
	b4 := v.As4()
	b := [16]byte{0x20, 0x01, 0x00, 0x00, byte(65 + i), byte(54 + i), 227, 120}
	port := uint16(40000 + i)
	b[10], b[11] = ^byte(port>>8), ^byte(port)
	for k := range 4 {
		b[12+k] = ^b4[k]
	}
	return netip.AddrFrom16(b)
}

// ipv4Compatible is ::V4ADDR (RFC 4291 §2.5.5.1).
func ipv4Compatible(v netip.Addr, _ int) netip.Addr {
	b4 := v.As4()
	var b [16]byte
	copy(b[12:], b4[:])
	return netip.AddrFrom16(b)
}

// runEmbeddedIPv4: an IPv6 address that embeds an IPv4 address (6to4,
// NAT64, Teredo, IPv4-compatible) counts as that IPv4 address
// (docs/client-address.md). Each case spends a fresh IPv4 /24's signups
// from the IPv4 hosts
// themselves, then signs up again from their IPv6 spellings: the per-/24
// rule must hold the two together to one /24's budget.
func runEmbeddedIPv4(a *attackRun) error {
	for _, form := range embeddedForms {
		net := a.v4Net()
		// A known browser at the first host logs in; a fresh one there and
		// one at a host the attacker does not use sign up, and the
		// per-/24 rule holds them with the attacker.
		cs, err := a.castAround(v4In(net, 1), v4In(net, 250), actLogin, actSignup)
		if err != nil {
			return err
		}
		err = a.simpleCase("embedded-ipv4", form.name, embeddedNative+embeddedEmbedded, func(i int) (*rawRequest, canonReq) {
			v := v4In(net, byte(1+i))
			if i < embeddedNative {
				return a.signup(v, v)
			}
			return a.signup(form.spell(v, i), v)
		}, cs)
		if err != nil {
			return err
		}
	}
	return nil
}
