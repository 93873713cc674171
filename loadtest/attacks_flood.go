package main

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/node"
)

// The key-flood class (issue 9, bypass 3): a flood of new keys on one
// route must not make the store forget a counter that is still refusing
// on another.

// keyFloodTarget is the route the flood goes to: GET /api/orders, as in
// the issue; the shipped policy counts it on two rules (api-per-ip and its
// shadow), each a new key per /64.
const keyFloodTarget = "/api/orders"

// keyFloodAfter is how many sends to the victim follow the flood.
const keyFloodAfter = 3

// floodSize returns the flood's request count: -flood, or the memory
// store's max_keys × 1.1; 0 when neither applies (a Redis store).
func (a *attackRun) floodSize() int {
	if a.p.flood > 0 {
		return a.p.flood
	}
	if node.Of(a.m.p).Store.Kind != "memory" || node.Of(a.m.p).Store.MaxKeys <= 0 {
		return 0
	}
	return (node.Of(a.m.p).Store.MaxKeys*attacksFloodTenths + 9) / 10
}

func keyFloodRequests(a *attackRun) int64 {
	return int64(a.floodSize()) + 2*sendLimitProbe + keyFloodAfter
}

// sendLimitProbe caps the sends that spend the victim's budget before
// the flood.
const sendLimitProbe = 20

// runKeyFlood: spend a victim phone's sends until the edge refuses one,
// flood new keys on another route from distinct /64s, then send to the
// victim again: the victim must still be refused. The gain is every send
// to the victim that reached the origin, before and after the flood; the
// bound, what the policy allows one phone over the whole case.
func runKeyFlood(a *attackRun) error {
	if a.noPhone("key-flood") {
		return nil
	}
	n := a.floodSize()
	if n == 0 {
		a.skip("key-flood", "", "the policy's store is not the memory store: give the flood's size with -flood")
		return nil
	}
	b, err := a.block()
	if err != nil {
		return err
	}
	victim := b.phones[a.rng.IntN(len(b.phones))]
	// A known user of its own address, and the owner of a phone in the
	// victim's block: after the flood, their counters and markers are
	// still there, and nothing refuses them.
	k, err := a.knownAt(a.v6Client(), netip.Addr{}, actLogin|actAPI)
	if err != nil {
		return err
	}
	tc, cs, err := a.beginCast("key-flood", "", k, a.ownerOf(otherPhone(b, victim)))
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	send := func() (int, error) {
		client := a.v6Client()
		ans, err := tc.send(c, a.otpRequest(otpSendPath, client, "application/json", jsonBody(otpFields(victim))), a.otpCanon(otpSendPath, client, otpFields(victim)))
		return ans.status, err
	}
	refused := false
	for range sendLimitProbe {
		status, err := send()
		if err != nil {
			return err
		}
		if status == fasthttp.StatusTooManyRequests {
			refused = true
			break
		}
	}
	if !refused {
		return fmt.Errorf("key-flood: %d sends to one phone and none refused: the policy's per-phone limit is not what %s says", sendLimitProbe, a.p.policy)
	}
	c.close()

	fs, err := a.flood(n)
	if err != nil {
		return err
	}
	tc.res.sent += fs.sent
	for s, k := range fs.statuses {
		tc.res.statuses[s] += k
	}
	for range keyFloodAfter {
		if _, err := send(); err != nil {
			return err
		}
	}
	return tc.end(cs, func(p string) bool { return p == otpSendPath }, fmt.Sprintf("sends to %s that reached the origin, before and after a flood of %d GET %s from %d distinct /64s in %s",
		victim, fs.sent, keyFloodTarget, fs.sent, fs.elapsed.Round(time.Millisecond)))
}

// floodStats is what a flood did.
type floodStats struct {
	sent     int64
	statuses map[int]int64
	elapsed  time.Duration
}

// flood sends n GET keyFloodTarget, request i from the i-th /64 of a /40
// of 2001:db8::/32 no case of the run uses, over attacksFloodConns
// connections.
func (a *attackRun) flood(n int) (floodStats, error) {
	base := a.floodBase()
	return a.blast(n, func(i int) *rawRequest {
		b := base
		b[5], b[6], b[7] = byte(i>>16), byte(i>>8), byte(i)
		r := &rawRequest{method: fasthttp.MethodGet, target: keyFloodTarget}
		r.add("Host", a.p.host)
		name, value := forwardingHeader(a.m.p.ForwardedHeader, netip.AddrFrom16(b))
		r.add(name, value)
		return r
	})
}

// parallel runs do(c, i) for every i in [0, n) over attacksFloodConns
// connections, each i once, and tallies the statuses do returns; it
// stops at the first error.
func (a *attackRun) parallel(n int, do func(c *rawConn, i int) (int, error)) (floodStats, error) {
	var next atomic.Int64
	var run runErr
	var wg sync.WaitGroup
	tallies := make([]map[int]int64, attacksFloodConns)
	start := time.Now()
	for w := range attacksFloodConns {
		tallies[w] = make(map[int]int64)
		wg.Go(func() {
			c := a.conn(netip.Addr{})
			defer c.close()
			for !run.stopped(a.ctx) {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				status, err := do(c, int(i))
				if err != nil {
					run.fail(fmt.Errorf("request %d of %d: %w", i+1, n, err))
					return
				}
				tallies[w][status]++
			}
		})
	}
	wg.Wait()
	fs := floodStats{statuses: make(map[int]int64), elapsed: time.Since(start)}
	for _, t := range tallies {
		for s, k := range t {
			fs.statuses[s] += k
			fs.sent += k
		}
	}
	a.sent += fs.sent
	return fs, run.err(a.ctx)
}

// floodBase returns the first address of a /40 of 2001:db8::/32 whose
// /48s no case of the run took, and takes them all.
func (a *attackRun) floodBase() [16]byte {
	for {
		hi := byte(a.rng.Uint32())
		free := true
		for lo := range 256 {
			if a.sites[uint16(hi)<<8|uint16(lo)] {
				free = false
				break
			}
		}
		if !free {
			continue
		}
		for lo := range 256 {
			a.sites[uint16(hi)<<8|uint16(lo)] = true
		}
		b := [16]byte{0x20, 0x01, 0x0d, 0xb8, hi}
		b[15] = 1
		return b
	}
}
