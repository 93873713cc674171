package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// The slowloris class (issue 24, harm b): one untrusted peer opens more
// connections than the edge's listener holds, each carrying a request
// whose header never ends. The attacker gains nothing at the origin (a
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

func slowlorisRequests(a *attackRun) int64 { return int64(a.slowlorisSize()) + 8 }

// heldConn is one of the attacker's connections.
type heldConn struct {
	c net.Conn
	// answer is what the edge sent on it, read once the users have
	// acted; closed is true when the edge closed it.
	answer []byte
	closed bool
}

// runSlowloris opens the connections from one untrusted loopback address,
// plays the users (a known browser, a new one reading the API) from two
// others while they are held, then reads what the edge answered on each
// connection and closes them all.
func runSlowloris(a *attackRun) error {
	peer, ok := a.untrustedPeer()
	kp, ok2 := a.untrustedPeer()
	fp, ok3 := a.untrustedPeer()
	if !ok || !ok2 || !ok3 {
		a.skip("slowloris", "", "no untrusted loopback address to connect from (the target is not on 127.0.0.0/8, or the policy trusts all of it)")
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
	tc, cs, err := a.beginCast("slowloris", "half-sent", k, f)
	if err != nil {
		return err
	}
	// The surplus connections' 503s are the harm measured, not a store
	// that could not decide.
	tc.expect503 = true
	n := a.slowlorisSize()
	tc.first = time.Now()
	conns, err := a.openHalfSent(peer, n)
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
	if answered+closed == 0 {
		return fmt.Errorf("slowloris: the edge held all %d half-sent connections from %s and refused none while the users acted: its connection caps are above them; give -slowloris above them", len(conns), peer)
	}
	tc.bound = &caseBoundResult{0, "a request whose header never ends is never forwarded"}
	tc.finish(gain, fmt.Sprintf("half-sent logins that reached the origin: of %d connections from %s, %d held open with no answer while the users acted, %d answered, %d closed", len(conns), peer, held, answered, closed))
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

// openHalfSent opens n connections to the edge from peer, over
// slowlorisDialers goroutines, and writes the half-sent request on each.
func (a *attackRun) openHalfSent(peer netip.Addr, n int) ([]*heldConn, error) {
	head := []byte(fmt.Sprintf(slowlorisHead, a.p.host))
	conns := make([]*heldConn, n)
	var next atomic.Int64
	var run runErr
	var wg sync.WaitGroup
	for range slowlorisDialers {
		wg.Go(func() {
			d := net.Dialer{Timeout: a.cfg.timeout, LocalAddr: &net.TCPAddr{IP: peer.AsSlice()}}
			for !run.stopped(a.ctx) {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
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
