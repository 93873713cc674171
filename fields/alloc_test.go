//go:build !race

package fields

import (
	"strings"
	"testing"
)

// TestAllocs holds the body readers to one allocation, the returned
// string, and BodyKind, ParseMediaType and CheckMerged to none.
func TestAllocs(t *testing.T) {
	formBody := []byte("channel=sms&phone=%28202%29+555-0100&phone=(202)+555-0100&request_id=9f1c")
	escaped := []byte(`{"\u0070hone":"\u0032\u0030\u0032","phone":"202","x":[1,{"y":"\ud83d\ude00"}]}`)
	ctBytes := []byte("application/json; charset=utf-8")
	oddForm := []byte("a=1;b=2&[x]=1&phone]=%2B1&x=y]=z&phone=%2B1&challenge.id=3&phone[=4")
	jsonSrc, _ := ParseSource("json:phone")
	ampJSON := []byte(`{"phone":"+12025550100","next":"https://example.com/?a=1&b=2&c=` + strings.Repeat("x", 300) + `","t":"YQ=="}`)
	nestedSrc, _ := ParseSource("json:user.phone")
	query := []byte("utm=1&user[phone]=%2B12025550100&[phone]=%2B12025550100;x=1&a.b[c]=2")
	cookies := []byte("_ga=GA1.2; phone=%2B12025550100; user[phone]=%2B12025550100")
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
		{"BodyKind on bytes", 0, func() { _ = BodyKind(ctBytes, formBody) }},
		{"ParseMediaType, quoted charset", 0, func() { _ = ParseMediaType(`application/json; charset="utf-8"; x=y`) }},
		{"FormField, every reading", 1, func() { benchSink, _, _ = FormField(oddForm, "phone") }},
		{"BodyField JSON, read as a form too", 1, func() { benchSink, _, _ = jsonSrc.BodyField(BodyJSON, otpSendBody) }},
		{"BodyField JSON with & and =, read as a form too", 1, func() { benchSink, _, _ = jsonSrc.BodyField(BodyJSON, ampJSON) }},
		{"CheckMerged", 0, func() { _ = jsonSrc.CheckMerged(query, cookies, "+12025550100", true) }},
		{"CheckMerged, nested path", 0, func() { _ = nestedSrc.CheckMerged(query, cookies, "+12025550100", true) }},
		{"CheckMerged, only in the query", 0, func() { _ = jsonSrc.CheckMerged(query, cookies, "", false) }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.f); got > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, got, tt.max)
		}
	}
}
