//go:build !race

package otp

import "testing"

// TestAllocs holds the body readers to one allocation, the returned
// string, and BodyKind and AppendSessionKey (with room in dst) to none.
// Normalize is phonenumbers' and is measured by BenchmarkNormalize only.
func TestAllocs(t *testing.T) {
	formBody := []byte("channel=sms&phone=%28202%29+555-0100&phone=(202)+555-0100&request_id=9f1c")
	escaped := []byte(`{"\u0070hone":"\u0032\u0030\u0032","phone":"202","x":[1,{"y":"\ud83d\ude00"}]}`)
	dst := make([]byte, 0, 64)
	long := string(otpSendBody)
	tests := []struct {
		name string
		max  float64
		f    func()
	}{
		{"JSONField", 1, func() { benchSink, _, _ = JSONField(otpSendBody, []string{"phone"}) }},
		{"JSONField nested", 1, func() { benchSink, _, _ = JSONField(otpSendBody, []string{"captcha", "action"}) }},
		{"JSONField escaped duplicates", 1, func() { benchSink, _, _ = JSONField(escaped, []string{"phone"}) }},
		{"JSONField missing", 0, func() { benchSink, _, _ = JSONField(otpSendBody, []string{"email"}) }},
		{"JSONField malformed", 0, func() { _, _, _ = JSONField(otpSendBody[:500], []string{"phone"}) }},
		{"FormField duplicates", 1, func() { benchSink, _, _ = FormField(formBody, "phone") }},
		{"FormField missing", 0, func() { benchSink, _, _ = FormField(formBody, "email") }},
		{"BodyKind", 0, func() { _ = BodyKind("application/x-www-form-urlencoded; charset=utf-8", formBody) }},
		{"AppendSessionKey", 0, func() { dst = AppendSessionKey(dst[:0], "+12025550100", "9f1c2b7e-4d3a-4f8e-9a6b") }},
		{"Normalize invalid, too long", 0, func() { _, _ = Normalize(long, "US") }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.f); got > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, got, tt.max)
		}
	}
}
