package keyhash

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules/counter"
)

// BenchmarkValueHash is Hash of a typical key's values (a tag and an IPv4
// address's 4 bytes length-prefixed, as rules.AppendValue encodes them)
// under each key mode; the cache of the previous value is cleared each
// time so every call hashes.
func BenchmarkValueHash(b *testing.B) {
	buf := []byte{1, 4, 203, 0, 113, 7}
	for _, tt := range []struct {
		name string
		f    Formats
	}{{"format1", Formats{Format: counter.KeyFormat1}}, {"format2", Formats{Format: counter.KeyFormat2}}, {"dual", Formats{Format: counter.KeyFormat2, DualUntil: time.Unix(1<<40, 0)}}} {
		b.Run(tt.name, func(b *testing.B) {
			k, err := New([]byte("bench secret"), nil, tt.f)
			if err != nil {
				b.Fatal(err)
			}
			var h Hasher
			h.Begin(k, time.Unix(0, 0), 0)
			b.ReportAllocs()
			for b.Loop() {
				h.prev, h.pairs = h.prev[:0], h.pairs[:0]
				h.Hash(buf)
			}
		})
	}
}
