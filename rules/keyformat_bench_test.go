package rules

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"
	"time"
)

// BenchmarkValueHash is valueHash of a typical key's values (a tag and an
// IPv4 address's 4 bytes length-prefixed) under each key mode; the cache of
// the previous value is cleared each time so every call hashes.
func BenchmarkValueHash(b *testing.B) {
	buf := AppendValue([]byte{1}, []byte{203, 0, 113, 7})
	for _, tt := range []struct {
		name string
		f    KeyFormats
	}{{"format1", KeyFormats{Format: KeyFormat1}}, {"format2", KeyFormats{Format: KeyFormat2}}, {"dual", KeyFormats{Format: KeyFormat2, DualUntil: time.Unix(1<<40, 0)}}} {
		b.Run(tt.name, func(b *testing.B) {
			e, err := NewEngine(EngineOptions{Store: &nopStore{}, Secret: []byte("bench secret"), KeyFormats: tt.f})
			if err != nil {
				b.Fatal(err)
			}
			s := NewScratch(1)
			s.owner, s.mode = e, e.formats.Load().mode(time.Unix(0, 0))
			if s.mode != mode2 {
				s.mac = hmac.New(sha256.New, e.secret)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.prev, s.pairs = s.prev[:0], s.pairs[:0]
				s.valueHash(buf)
			}
		})
	}
}
