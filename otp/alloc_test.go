//go:build !race

package otp

import "testing"

// TestAllocs holds AppendSessionKey (with room in dst), and Normalize
// refusing input over MaxPhoneBytes, to no allocation. Normalize's parsing
// is phonenumbers' and is measured by BenchmarkNormalize only; the field
// readers' allocations are held in package fields.
func TestAllocs(t *testing.T) {
	dst := make([]byte, 0, 64)
	long := string(otpSendBody)
	tests := []struct {
		name string
		max  float64
		f    func()
	}{
		{"AppendSessionKey", 0, func() { dst = AppendSessionKey(dst[:0], "9f1c2b7e-4d3a-4f8e-9a6b") }},
		{"Normalize invalid, too long", 0, func() { _, _ = Normalize(long, "US") }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.f); got > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, got, tt.max)
		}
	}
}
