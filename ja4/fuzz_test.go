package ja4

import (
	"bytes"
	"testing"
)

// FuzzRecords: garbage never panics, a fingerprint is always of JA4's
// shape, and a Conn reading the same bytes in pieces agrees with Records.
// The seeds are the reference vectors, so mutations start from real
// hellos. go test -fuzz FuzzRecords ./ja4/ runs it for longer.
func FuzzRecords(f *testing.F) {
	for _, v := range readVectors(f) {
		f.Add(v.records, uint8(200))
	}
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0}, uint8(1))
	f.Add([]byte("GET / HTTP/1.1\r\n"), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		fp, err := Records(nil, b)
		if err == nil && !Valid(fp) {
			t.Fatalf("fingerprint %q is not of JA4's shape", fp)
		}
		if err != nil && fp != nil {
			t.Fatalf("error %v with output %q", err, fp)
		}
		got := fingerprintThroughConn(b, int(chunk)+1)
		if len(b) <= MaxRecord && !bytes.Equal(got, fp) {
			t.Fatalf("Conn: got %q, Records %q (%v)", got, fp, err)
		}
		if _, err := scan(b); err == nil {
			if _, e := Append(nil, b[5:], false); e == nil && len(b) < 9 {
				t.Fatal("a complete hello in under 9 bytes")
			}
		}
	})
}
