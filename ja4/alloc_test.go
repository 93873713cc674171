//go:build !race

package ja4

import (
	"bytes"
	"testing"
)

func TestAllocs(t *testing.T) {
	v := readVectors(t)[0]
	dst := make([]byte, 0, Size)
	Records(dst, v.records) // warm the pool
	if n := testing.AllocsPerRun(100, func() { Records(dst, v.records) }); n != 0 {
		t.Errorf("Records: %v allocs, want 0", n)
	}
	c := NewConn(&chunkConn{r: bytes.NewReader(v.records), n: 4096})
	c.Read(make([]byte, 4096))
	c.Fingerprint()
	if n := testing.AllocsPerRun(100, func() { c.Fingerprint() }); n != 0 {
		t.Errorf("Fingerprint once computed: %v allocs, want 0", n)
	}
}

func BenchmarkRecords(b *testing.B) {
	v := readVectors(b)[0]
	dst := make([]byte, 0, Size)
	b.ReportAllocs()
	for b.Loop() {
		Records(dst, v.records)
	}
}
