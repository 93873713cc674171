package ja4

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// chunkConn is a net.Conn reading r at most n bytes at a time.
type chunkConn struct {
	net.Conn
	r      *bytes.Reader
	n      int
	reads  int
	closed bool
}

func (c *chunkConn) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p[:min(len(p), c.n)])
}
func (c *chunkConn) Close() error                    { c.closed = true; return nil }
func (c *chunkConn) SetReadDeadline(time.Time) error { return nil }

func TestConnStopsRecording(t *testing.T) {
	v := readVectors(t)[0]
	// The hello, then application bytes the Conn must not keep.
	stream := append(append([]byte(nil), v.records...), bytes.Repeat([]byte{23}, 64<<10)...)
	c := NewConn(&chunkConn{r: bytes.NewReader(stream), n: 1000})
	buf := make([]byte, 1000)
	for {
		if _, err := c.Read(buf); err == io.EOF {
			break
		}
		if !c.recording.Load() && c.buf != nil && len(*c.buf) > len(v.records)+1000 {
			t.Fatalf("recorded %d bytes after the hello was complete", len(*c.buf))
		}
	}
	if got := c.Fingerprint(); string(got) != v.want {
		t.Fatalf("got %s, want %s", got, v.want)
	}
	if c.buf != nil {
		t.Error("the recorded bytes were kept after fingerprinting")
	}
	if got := c.Fingerprint(); string(got) != v.want {
		t.Errorf("second call: got %s", got)
	}
}

func TestConnGarbage(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
	}{
		{"HTTP", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"endless handshake record", append([]byte{22, 3, 1, 0x40, 0x00, 1, 0, 0x3f, 0xfc}, bytes.Repeat([]byte{0}, 40<<10)...)},
		{"record after record, never complete", bytes.Repeat([]byte{22, 3, 1, 0, 1, 1}, 10<<10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := &chunkConn{r: bytes.NewReader(tt.b), n: 512}
			c := NewConn(cc)
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			if c.recording.Load() {
				t.Error("still recording after the stream proved not to be a hello")
			}
			if c.buf != nil {
				t.Errorf("kept %d bytes", len(*c.buf))
			}
			if fp := c.Fingerprint(); fp != nil {
				t.Errorf("got fingerprint %s", fp)
			}
		})
	}
}

func TestConnCloseDrops(t *testing.T) {
	v := readVectors(t)[0]
	cc := &chunkConn{r: bytes.NewReader(v.records[:100]), n: 100}
	c := NewConn(cc)
	c.Read(make([]byte, 100))
	if c.buf == nil {
		t.Fatal("nothing recorded")
	}
	c.Close()
	if c.buf != nil || !cc.closed {
		t.Error("Close kept the bytes or did not close the connection")
	}
	if c.Fingerprint() != nil {
		t.Error("a fingerprint from half a hello")
	}
}

// TestConnScanIsLinear: a hello in one-byte records, read a byte at a
// time, is walked record by record once, not once per read: a client
// cannot make the recorder's work grow with the square of what it sends.
func TestConnScanIsLinear(t *testing.T) {
	v := readVectors(t)[0]
	want, _ := scan(v.records)
	msg := v.records[5 : 5+want]
	var b []byte
	for _, c := range msg {
		b = append(b, record([]byte{c})...)
	}
	c := NewConn(&chunkConn{r: bytes.NewReader(b), n: 1})
	buf := make([]byte, 1)
	reads := 0
	for c.recording.Load() {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		reads++
	}
	if got := c.Fingerprint(); string(got) != v.want {
		t.Fatalf("got %s, want %s", got, v.want)
	}
	// Each read walks the records it completed plus the one in progress.
	if walks := c.sc.walks; walks > reads+len(msg) {
		t.Errorf("%d record walks for %d reads of %d records, want at most %d", walks, reads, len(msg), reads+len(msg))
	}
}
