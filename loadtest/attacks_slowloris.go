package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/node"
)

// The slowloris class (issue 24, harm b): one untrusted peer opens more
// connections than the edge's listener holds, each carrying a request
// whose header never ends (half-sent); then the addresses of one /24
// do, each under its own cap (one-network). The attacker gains nothing at the origin (a
// request whose header never ended is never forwarded); the harm is what
// the full listener does to everyone else, so the case plays real users
// at other addresses while the connections are held open, and counts
// their requests the edge refused or never answered (bound 0: nothing in
// the policy holds them). A second line counts the answers, to the
// attacker's surplus connections and to the users, that carry an HTTP
// library's own text rather than the edge's bare answer (bound 0).

// slowlorisListener is the most connections the edge's listener serves at
// once when the policy says nothing of it: gateway/server.go's maxConns,
// fasthttp's Server.Concurrency. The attack opens slowlorisOver more.
const (
	slowlorisListener = 10_000
	slowlorisOver     = 50
	slowlorisDialers  = 16
	slowlorisMax      = 100_000
)

// slowlorisHead is the half-sent request: a login whose header never ends.
const slowlorisHead = "POST /login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 64\r\nX-Attack-Slowloris: "

// libraryTexts are what fasthttp itself answers a connection it will not
// serve (server.go: rejectConn); the edge's own answers never say them.
var libraryTexts = [][]byte{
	[]byte("Server.Concurrency limit exceeded"),
	[]byte("exceeds MaxConnsPerIP"),
}

// slowlorisSize is the attack's connections: -slowloris, or the
// listener's cap and slowlorisOver more.
func (a *attackRun) slowlorisSize() int {
	if a.p.slowloris > 0 {
		return a.p.slowloris
	}
	return slowlorisListener + slowlorisOver
}

// slowlorisRequests is the cases' connections and their users' requests.
func slowlorisRequests(a *attackRun) int64 {
	return 2*(int64(a.slowlorisSize())+8) + slowlorisTimeoutConns*3/2
}

// heldConn is one of the attacker's connections.
type heldConn struct {
	c net.Conn
	// answer is what the edge sent on it, read once the users have
	// acted; closed is true when the edge closed it.
	answer []byte
	closed bool
}

// runSlowloris plays the class's two cases: half-sent, from one untrusted
// loopback address, and one-network, from as many addresses of one IPv4
// /24 as it takes to open the connections with each address under
// max_conns_per_ip (issue 24's tester: the 256 addresses of a /24, or the
// 65,536 /64s of a /48, filled max_conns together; the loopback has no
// IPv6 prefix to play the /48 from, gateway's
// TestOneNetworkCannotFillTheNode plays it).
func runSlowloris(a *attackRun) error {
	peer, ok := a.untrustedPeer()
	if !ok {
		a.skip("slowloris", "", "no untrusted loopback address to connect from (the target is not on 127.0.0.0/8, or the policy trusts all of it)")
		return nil
	}
	if err := a.slowlorisCase("half-sent", []netip.Addr{peer}, true); err != nil {
		return err
	}
	n := a.slowlorisSize()
	perIP := max(node.Of(a.m.p).Conns.PerIP, 1)
	peers, ok := a.networkPeers(peer, (n+perIP-1)/perIP)
	if !ok {
		a.skip("slowloris", "one-network", fmt.Sprintf("no /24 of 127.0.0.0/8 with %d untrusted addresses to spread %d connections at %d an address", (n+perIP-1)/perIP, n, perIP))
		return nil
	}
	if err := a.slowlorisCase("one-network", peers, false); err != nil {
		return err
	}
	return a.slowlorisTimeouts()
}

// slowlorisTimeoutConns is how many connections slowloris/timeout-answers
// lets time out, half of them kept alive by a request served first.
const slowlorisTimeoutConns = 8

// slowlorisTimeouts plays slowloris/timeout-answers (the tester's F7):
// users on a slow link whose requests stall past header_timeout, on new
// connections and on kept-alive ones whose last answer was written
// before, must be told so with the edge's 408 before the close, not see
// the connection end without an answer (the edge once wrote it under the
// write deadline armed before the last answer, expired by then). Its
// gain is what of those requests reached the origin (0: a header that
// never ends is never forwarded); its collateral, the users' timed-out
// requests closed without the edge's 408 (bound 0). It waits for the
// node's header_timeout (10 s on the shipped policy).
func (a *attackRun) slowlorisTimeouts() error {
	peer, ok := a.untrustedPeer()
	if !ok {
		a.skip("slowloris", "timeout-answers", "no untrusted loopback address to connect from")
		return nil
	}
	before, err := a.origin.hits(a.ctx)
	if err != nil {
		return err
	}
	wait := node.Of(a.m.p).Conns.HeaderTimeout + a.cfg.timeout
	d := net.Dialer{Timeout: a.cfg.timeout, LocalAddr: &net.TCPAddr{IP: peer.AsSlice()}}
	head := []byte(fmt.Sprintf(slowlorisHead, a.p.host))
	type slowConn struct {
		c  net.Conn
		br *bufio.Reader
	}
	var conns []slowConn
	defer func() {
		for _, c := range conns {
			c.c.Close()
		}
	}()
	for i := range slowlorisTimeoutConns {
		c, err := d.DialContext(a.ctx, "tcp", a.cfg.target.addr)
		if err != nil {
			return fmt.Errorf("slowloris/timeout-answers: %w", err)
		}
		sc := slowConn{c, bufio.NewReader(c)}
		conns = append(conns, sc)
		_ = c.SetDeadline(time.Now().Add(wait))
		if i%2 == 1 { // kept alive: a request served first
			if _, err := fmt.Fprintf(c, "GET /api/attacks-slow-user-%d HTTP/1.1\r\nHost: %s\r\n\r\n", i, a.p.host); err != nil {
				return fmt.Errorf("slowloris/timeout-answers: %w", err)
			}
			resp := fasthttp.AcquireResponse()
			err := resp.Read(sc.br)
			st := resp.StatusCode()
			fasthttp.ReleaseResponse(resp)
			if err != nil || st != fasthttp.StatusOK {
				return fmt.Errorf("slowloris/timeout-answers: the slow user's first request: status %d, %v", st, err)
			}
		}
		if _, err := c.Write(head); err != nil {
			return fmt.Errorf("slowloris/timeout-answers: %w", err)
		}
	}
	var unanswered, other int64
	for _, c := range conns {
		b, _ := io.ReadAll(c.br) // to the edge's close, or wait's end
		switch st := answerStatus(b); {
		case len(b) == 0:
			unanswered++
		case st != fasthttp.StatusRequestTimeout || hasLibraryText(b):
			other++
		}
	}
	after, err := a.origin.hits(a.ctx)
	if err != nil {
		return err
	}
	gain, err := hitsDelta(before, after, func(p string) bool { return p == "/login" })
	if err != nil {
		return err
	}
	n := int64(len(conns))
	r := caseResult{name: "slowloris/timeout-answers", sent: n + n/2, gain: gain,
		bound: caseBoundResult{0, "a request whose header never ends is never forwarded"},
		note:  fmt.Sprintf("stalled logins that reached the origin, of %d past header_timeout (%v) from %s, %d of them on kept-alive connections", n, node.Of(a.m.p).Conns.HeaderTimeout, peer, n/2)}
	r.coll.refused = unanswered + other
	r.coll.breach = r.coll.refused > 0
	r.coll.lines = []string{fmt.Sprintf("slow users: %d of %d timed-out requests closed with no answer, %d answered other than the edge's 408, bound 0", unanswered, n, other)}
	a.results = append(a.results, r)
	a.sent += r.sent
	writeAttackLine(a.out, &r)
	fmt.Fprintf(a.out, "    sent %d; gain: %s\n    bound: %s\n", r.sent, r.note, r.bound.why)
	writeCollateral(a.out, &r)
	return nil
}

// networkPeers returns k untrusted addresses of one /24 of the loopback,
// none used before in the run and the /24 not peer's (the run's other
// addresses are drawn from all of 127.0.0.0/8, so they are elsewhere).
func (a *attackRun) networkPeers(peer netip.Addr, k int) ([]netip.Addr, bool) {
	if k < 1 || k > 254 {
		return nil, false
	}
	for range 100 {
		x := a.rng.Uint32N(1 << 16)
		block := netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(x >> 8), byte(x), 0}), 24)
		if block.Contains(peer) {
			continue
		}
		var out []netip.Addr
		for h := 1; h < 255 && len(out) < k; h++ {
			p := netip.AddrFrom4([4]byte{127, byte(x >> 8), byte(x), byte(h)})
			if !a.locals[p] && !a.m.p.Client.Trusted(p) {
				out = append(out, p)
			}
		}
		if len(out) == k {
			for _, p := range out {
				a.locals[p] = true
			}
			return out, true
		}
	}
	return nil, false
}

// slowlorisCase opens the case's connections from peers, each holding
// ⌈n ÷ len(peers)⌉ at most, plays the users (a known browser, a new one
// reading the API) from two other untrusted addresses (outside peers'
// /24) while they are held, then reads what the edge answered on each
// connection and closes them all. With libraryText it adds the
// slowloris/library-text line: the answers that carry an HTTP library's
// own text.
func (a *attackRun) slowlorisCase(name string, peers []netip.Addr, libraryText bool) error {
	kp, ok := a.untrustedPeerOutside(peers[0])
	fp, ok2 := a.untrustedPeerOutside(peers[0])
	if !ok || !ok2 {
		a.skip("slowloris", name, "no untrusted loopback address for the users (the target is not on 127.0.0.0/8, or the policy trusts all of it)")
		return nil
	}
	k, err := a.knownAt(kp, kp, actLogin)
	if err != nil {
		return err
	}
	f, err := a.freshAt(elsewhere, fp, fp, actLogin|actAPI)
	if err != nil {
		return err
	}
	k.noAnswer, f.noAnswer = true, true
	k.keep, f.keep = true, true
	tc, cs, err := a.beginCast("slowloris", name, k, f)
	if err != nil {
		return err
	}
	// The surplus connections' 503s are the harm measured, not a store
	// that could not decide.
	tc.expect503 = true
	n := a.slowlorisSize()
	tc.first = time.Now()
	conns, err := a.openHalfSent(peers, n)
	defer func() {
		for _, h := range conns {
			h.c.Close()
		}
	}()
	if err != nil {
		return err
	}
	tc.last = time.Now()
	tc.res.sent = int64(len(conns))
	a.sent += tc.res.sent
	gain, err := tc.reachedAll(nil)
	if err != nil {
		return err
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	var answered, closed, lib int64
	var libWhere []string
	buf := make([]byte, 512)
	for _, h := range conns {
		m, eof, err := peek(h.c, buf)
		if err != nil {
			return fmt.Errorf("slowloris: reading what the edge answered: %w", err)
		}
		h.answer = append(h.answer, buf[:m]...)
		h.closed = h.closed || eof
		switch {
		case len(h.answer) > 0:
			answered++
			tc.res.statuses[answerStatus(h.answer)]++
			if hasLibraryText(h.answer) {
				lib++
				if !slices.Contains(libWhere, "the attacker's surplus connections") {
					libWhere = append(libWhere, "the attacker's surplus connections")
				}
			}
		case h.closed:
			closed++
		}
	}
	for _, b := range cs.bs {
		for _, ans := range b.answers {
			if w := b.kind.String() + "'s requests"; hasLibraryText(ans.body) {
				lib++
				if !slices.Contains(libWhere, w) {
					libWhere = append(libWhere, w)
				}
			}
		}
	}
	held := int64(len(conns)) - answered - closed
	from := peers[0].String()
	if len(peers) > 1 {
		from = fmt.Sprintf("%d addresses of %s/24", len(peers), netip.PrefixFrom(peers[0], 24).Masked().Addr())
	}
	if answered+closed == 0 {
		return fmt.Errorf("slowloris: the edge held all %d half-sent connections from %s and refused none while the users acted: its connection caps are above them; give -slowloris above them", len(conns), from)
	}
	tc.bound = &caseBoundResult{0, "a request whose header never ends is never forwarded"}
	tc.finish(gain, fmt.Sprintf("half-sent logins that reached the origin: of %d connections from %s, %d held open with no answer while the users acted, %d answered, %d closed", len(conns), from, held, answered, closed))
	if !libraryText {
		return nil
	}
	r := caseResult{name: "slowloris/library-text", sent: answered + cs.bs[0].sent + cs.bs[1].sent, gain: lib,
		bound: caseBoundResult{0, "what the listener refuses gets the edge's own bare answer (docs/attacks.md, \"The classes\": slowloris)"},
		note:  "answers carrying fasthttp's own text (Server.Concurrency, MaxConnsPerIP)"}
	if len(libWhere) > 0 {
		r.note += ": " + strings.Join(libWhere, ", ")
	}
	r.coll.lines = []string{"played with slowloris/half-sent"}
	a.results = append(a.results, r)
	writeAttackLine(a.out, &r)
	fmt.Fprintf(a.out, "    %d answers read; gain: %s\n    bound: %s\n", r.sent, r.note, r.bound.why)
	writeCollateral(a.out, &r)
	return nil
}

// untrustedPeerOutside is untrustedPeer outside p's /24.
func (a *attackRun) untrustedPeerOutside(p netip.Addr) (netip.Addr, bool) {
	block := netip.PrefixFrom(p, 24).Masked()
	for range 100 {
		q, ok := a.untrustedPeer()
		if !ok || !block.Contains(q) {
			return q, ok
		}
	}
	return netip.Addr{}, false
}

// openHalfSent opens n connections to the edge from peers, the first
// ⌈n ÷ len(peers)⌉ from the first and so on, over slowlorisDialers
// goroutines, and writes the half-sent request on each.
func (a *attackRun) openHalfSent(peers []netip.Addr, n int) ([]*heldConn, error) {
	per := (n + len(peers) - 1) / len(peers)
	head := []byte(fmt.Sprintf(slowlorisHead, a.p.host))
	conns := make([]*heldConn, n)
	var next atomic.Int64
	var run runErr
	var wg sync.WaitGroup
	for range slowlorisDialers {
		wg.Go(func() {
			for !run.stopped(a.ctx) {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				peer := peers[int(i)/per]
				d := net.Dialer{Timeout: a.cfg.timeout, LocalAddr: &net.TCPAddr{IP: peer.AsSlice()}}
				c, err := d.DialContext(a.ctx, "tcp", a.cfg.target.addr)
				if err != nil {
					if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
						err = fmt.Errorf("%w: this process may not open %d connections (raise ulimit -n, or give -slowloris)", err, n)
					}
					run.fail(fmt.Errorf("slowloris: connection %d of %d from %s: %w", i+1, n, peer, err))
					return
				}
				conns[i] = &heldConn{c: c}
				_ = c.SetWriteDeadline(time.Now().Add(a.cfg.timeout))
				if _, err := c.Write(head); err != nil {
					// The edge may refuse and close a surplus connection at
					// once: what it answered is read later.
					conns[i].closed = true
				}
			}
		})
	}
	wg.Wait()
	out := conns[:0]
	for _, h := range conns {
		if h != nil {
			out = append(out, h)
		}
	}
	return out, run.err(a.ctx)
}

// answerStatus returns the status of an HTTP answer's first line, 0 when
// it is not one.
func answerStatus(b []byte) int {
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := resp.Header.Read(bufio.NewReader(bytes.NewReader(b))); err != nil {
		return 0
	}
	return resp.StatusCode()
}

// hasLibraryText reports whether an answer carries an HTTP library's own
// text.
func hasLibraryText(b []byte) bool {
	for _, t := range libraryTexts {
		if bytes.Contains(b, t) {
			return true
		}
	}
	return false
}
