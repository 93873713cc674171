//go:build !race

package nat

import "testing"

// The race detector's instrumentation allocates (and sync.Pool drops items
// at random under it), so this guard only runs without it, as fasthttp's
// allocation_test.go does.
func TestNoAllocs(t *testing.T) {
	s, cases := verifyCases(t)
	dst := make([]byte, 0, 256)
	type alloc struct {
		name string
		fn   func()
	}
	tests := []alloc{
		{"Mint", func() { dst, _ = s.Mint(dst[:0], t0) }},
		{"AppendSetCookie", func() { dst = s.AppendSetCookie(dst[:0], cases[0].value) }},
		{"AppendVisitorHash", func() { dst = s.AppendVisitorHash(dst[:0], testID) }},
	}
	for _, vc := range cases {
		tests = append(tests, alloc{"Verify " + vc.name, func() { s.Verify(vc.value, t0) }})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(1000, tt.fn); got != 0 {
				t.Errorf("got %v allocs per run, want 0", got)
			}
		})
	}
}
