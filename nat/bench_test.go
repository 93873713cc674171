package nat

import (
	"fmt"
	"testing"
)

// verifyCases are the paths through Verify, cheapest last.
func verifyCases(tb testing.TB) (*Signer, []struct {
	name  string
	value []byte
}) {
	s := signer(tb, secretA, secretB)
	valid, _ := s.Mint(nil, t0)
	second, _ := signer(tb, secretB).Mint(nil, t0)
	expired, _ := s.Mint(nil, t0.Add(-DefaultMaxAge))
	return s, []struct {
		name  string
		value []byte
	}{
		{"valid", valid},
		{"valid-second-secret", second},
		{"retired-secret", craft(secretRetired, 1, testID, uint64(t0.Unix()))},
		{"forged-first-key-id", craftKID(secretRetired, 1, keyIDOf(secretA), testID, uint64(t0.Unix()))}, // worst case: a MAC computed and refused
		{"tampered", append(valid[:50:50], "AAAAAA"...)},
		{"expired", expired},
		{"wrong-length", valid[:55]},
	}
}

func BenchmarkVerify(b *testing.B) {
	s, cases := verifyCases(b)
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Verify(bc.value, t0)
			}
		})
	}
}

// BenchmarkVerifyManySecrets: the key ID keeps Verify at one HMAC whatever
// the length of the secret list.
func BenchmarkVerifyManySecrets(b *testing.B) {
	secrets := make([][]byte, MaxSecrets)
	for i := range secrets {
		secrets[i] = []byte(fmt.Sprintf("many-secrets-%04d-0123456789", i))
	}
	s := signer(b, secrets...)
	last, _ := signer(b, secrets[MaxSecrets-1]).Mint(nil, t0)
	for _, bc := range []struct {
		name  string
		value []byte
	}{
		{"valid-last", last},
		{"forged-last-key-id", craftKID(secretRetired, 1, keyIDOf(secrets[MaxSecrets-1]), testID, uint64(t0.Unix()))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Verify(bc.value, t0)
			}
		})
	}
}

func BenchmarkVerifyParallel(b *testing.B) {
	s, cases := verifyCases(b)
	valid := cases[0].value
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := s.Verify(valid, t0); !ok {
				b.Error("got refused, want accepted")
				return
			}
		}
	})
}

func BenchmarkMint(b *testing.B) {
	s := signer(b, secretA, secretB)
	b.ReportAllocs()
	dst := make([]byte, 0, 64)
	for b.Loop() {
		dst, _ = s.Mint(dst[:0], t0)
	}
}

func BenchmarkAppendSetCookie(b *testing.B) {
	s := signer(b, secretA)
	value, _ := s.Mint(nil, t0)
	b.ReportAllocs()
	dst := make([]byte, 0, 256)
	for b.Loop() {
		dst = s.AppendSetCookie(dst[:0], value)
	}
}

func BenchmarkAppendVisitorHash(b *testing.B) {
	s := signer(b, secretA)
	b.ReportAllocs()
	dst := make([]byte, 0, 64)
	for b.Loop() {
		dst = s.AppendVisitorHash(dst[:0], testID)
	}
}
