package ja4

import (
	"net"
	"sync"
	"sync/atomic"
)

// Conn records the first bytes a client sends on a connection (its
// ClientHello) so that its JA4 fingerprint can be computed once the TLS
// handshake has read them. Wrap the accepted connection before
// tls.Server: rec := ja4.NewConn(raw); tc := tls.Server(rec, cfg).
//
// It keeps at most MaxRecord bytes, and stops recording as soon as the
// ClientHello is complete, or is known not to be one (a scanner's bytes,
// an HTTP request on the TLS port), or would not fit. Fingerprint then
// computes the JA4 once and drops the bytes; Close drops them too.
type Conn struct {
	net.Conn
	recording atomic.Bool // false once nothing more is recorded: Read's fast path

	mu    sync.Mutex
	state uint8   // stateRecording, stateComplete, stateDone
	buf   *[]byte // the recorded bytes (pooled), nil once dropped
	sc    scanner // how far the recorded records are walked
	fp    []byte  // the fingerprint, once computed; nil if none
}

const (
	stateRecording = iota // reading the ClientHello
	stateComplete         // buf holds a complete ClientHello
	stateDone             // fp is final (nil: no fingerprint)
)

// bufPool holds recording buffers; most hellos fit the first 2 KiB.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// NewConn wraps a freshly accepted TCP connection, before tls.Server.
func NewConn(c net.Conn) *Conn {
	rc := &Conn{Conn: c}
	rc.recording.Store(true)
	return rc
}

// Read reads from the connection, recording what it reads until the
// ClientHello is complete.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.recording.Load() {
		c.record(p[:n])
	}
	return n, err
}

func (c *Conn) record(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateRecording {
		return
	}
	if c.buf == nil {
		c.buf = bufPool.Get().(*[]byte)
	}
	b := *c.buf
	b = append(b, p[:min(len(p), MaxRecord-len(b))]...)
	*c.buf = b
	switch _, err := c.sc.scan(b); {
	case err == nil:
		c.state = stateComplete
		c.recording.Store(false)
	case err != ErrTruncated || len(b) >= MaxRecord:
		c.finish(nil)
	}
}

// finish sets the final fingerprint and drops the recorded bytes. c.mu is
// held.
func (c *Conn) finish(fp []byte) {
	c.fp, c.state = fp, stateDone
	c.recording.Store(false)
	if c.buf != nil {
		*c.buf = (*c.buf)[:0]
		bufPool.Put(c.buf)
		c.buf = nil
	}
}

// Fingerprint returns the connection's JA4 fingerprint
// ("t13d1516h2_8daaf6152771_e5627efa2ab1", Size bytes), computed once
// from the recorded ClientHello; nil if none was recorded, it could not be
// parsed, or the handshake has not read it yet. The caller must not
// modify the result. Once computed, it allocates nothing.
func (c *Conn) Fingerprint() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateComplete {
		fp, err := Records(make([]byte, 0, Size), *c.buf)
		if err != nil {
			fp = nil
		}
		c.finish(fp)
	}
	return c.fp
}

// Close closes the connection and drops what it recorded.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.state != stateDone {
		c.finish(nil) // not fingerprinted yet: none will be
	}
	c.mu.Unlock()
	return c.Conn.Close()
}
