package testredis

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a redis-server, for tests
// that make Redis look late, silent or cut off without touching the
// server: every chunk read on either side goes through that direction's
// filter, which forwards it by returning true. It stops, with every
// connection it made, when the test ends.
type Proxy struct {
	ln       net.Listener
	target   string
	toRedis  Filter
	toClient Filter
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

// Filter sees a chunk read from one side of a proxied connection: client
// is the connection to the proxy's client (a filter that keeps replies
// back may write them to it later), b the chunk, valid only during the
// call (copy it to keep it). It returns whether to forward b now. A nil
// Filter forwards everything.
type Filter func(client net.Conn, b []byte) bool

// NewProxy starts a proxy to target (HOST:PORT) whose commands pass
// toRedis and whose replies pass toClient. It fails the test if it cannot
// listen.
func NewProxy(t testing.TB, target string, toRedis, toClient Filter) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, toRedis: toRedis, toClient: toClient}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's HOST:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { pipe(s, c, c, p.toRedis) })
		p.wg.Go(func() { pipe(c, s, c, p.toClient) })
	}
}

// pipe copies src to dst, each chunk only when keep (nil: all) says so,
// until either end closes; then it closes both.
func pipe(dst, src, client net.Conn, keep Filter) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && (keep == nil || keep(client, buf[:n])) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF, or a closed end
			return
		}
	}
}

// HoldProxy is a Proxy that, while held, keeps Redis' replies back until
// Release: a Redis that answers late, or a node that reads it late. Got
// counts the reply chunks Redis sent, kept back or not.
type HoldProxy struct {
	*Proxy
	mu      sync.Mutex
	held    bool
	pending []heldReply
	got     atomic.Uint64
}

// heldReply is a reply chunk kept back, and the client it is for.
type heldReply struct {
	client net.Conn
	b      []byte
}

// NewHoldProxy starts a HoldProxy to target (HOST:PORT), not holding.
func NewHoldProxy(t testing.TB, target string) *HoldProxy {
	t.Helper()
	p := &HoldProxy{}
	p.Proxy = NewProxy(t, target, nil, func(client net.Conn, b []byte) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.got.Add(1)
		if p.held {
			p.pending = append(p.pending, heldReply{client, append([]byte(nil), b...)})
			return false
		}
		return true
	})
	return p
}

// Hold starts keeping replies back.
func (p *HoldProxy) Hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// Release sends the replies kept back, in order, and stops keeping them.
func (p *HoldProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.pending {
		_, _ = r.client.Write(r.b)
	}
	p.pending, p.held = nil, false
}

// Got is the number of reply chunks Redis has sent through p.
func (p *HoldProxy) Got() uint64 { return p.got.Load() }

// DelayProxy is a Proxy that adds a delay, settable while it runs, to
// every reply: a link that is steadily slow rather than silent. Each reply
// chunk is written to its client the delay after it came from Redis, in
// order; chunks in flight at once are delayed together, not one after
// another.
type DelayProxy struct {
	*Proxy
	delay atomic.Int64 // nanoseconds
}

// delayed is a reply chunk on its way, and when it may be written.
type delayed struct {
	at time.Time
	b  []byte
}

// NewDelayProxy starts a DelayProxy to target (HOST:PORT) adding d to
// every reply.
func NewDelayProxy(t testing.TB, target string, d time.Duration) *DelayProxy {
	t.Helper()
	p := &DelayProxy{}
	p.delay.Store(int64(d))
	var mu sync.Mutex
	var writers sync.WaitGroup
	queues := map[net.Conn]chan delayed{}
	// Registered before NewProxy's, so it runs after the proxy's pipes
	// have stopped calling the filter.
	t.Cleanup(func() {
		mu.Lock()
		for _, q := range queues {
			close(q)
		}
		mu.Unlock()
		writers.Wait()
	})
	p.Proxy = NewProxy(t, target, nil, func(client net.Conn, b []byte) bool {
		mu.Lock()
		q, ok := queues[client]
		if !ok {
			q = make(chan delayed, 1024)
			queues[client] = q
			writers.Go(func() {
				for c := range q {
					time.Sleep(time.Until(c.at))
					_, _ = client.Write(c.b) // after a close: dropped
				}
			})
		}
		mu.Unlock()
		q <- delayed{time.Now().Add(time.Duration(p.delay.Load())), append([]byte(nil), b...)}
		return false
	})
	return p
}

// SetDelay sets the delay added to replies read from Redis from now on.
func (p *DelayProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }
