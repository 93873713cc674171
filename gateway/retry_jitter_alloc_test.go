//go:build !race

package gateway

import (
	"strings"
	"testing"

	"github.com/edge-gateway/edge/rules"
)

// jitterAllocPolicy refuses /login from the second request on, by two
// rules: "jit" with jitter, "busy" with a refusal_status and refusal_body
// of its own and the longer wait, so its status and body answer.
const jitterAllocPolicy = `
edge {
  upstream        = "http://127.0.0.1:1"
  trusted_proxies = ["10.0.0.0/8", "fd00::/8"]
}
rule "jit" {
  paths              = ["/login"]
  key                = ["ip"]
  algorithm          = "fixed_window"
  limit              = 1
  period             = "100s"
  retry_after_jitter = "20%"
}
rule "busy" {
  paths                = ["/login"]
  key                  = ["ip"]
  limit                = 1
  period               = "1000s"
  refusal_status       = 503
  refusal_body         = "busy\n"
  refusal_content_type = "text/html; charset=utf-8"
}
`

// TestJitteredRefusalAllocatesNothing: the informative refusal, with
// retry_after_jitter's draw from the production source and the refusing
// rules' status and body, allocates nothing once warm
// (gateway/alloc_test.go's decision path, then the answer).
func TestJitteredRefusalAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, src, body string
	}{
		{"problem body", strings.Replace(jitterAllocPolicy, `refusal_body         = "busy\n"`+"\n  "+`refusal_content_type = "text/html; charset=utf-8"`, "", 1), `"violated-policies":["jit","busy"]`},
		{"refusal_body", jitterAllocPolicy, "busy\n"},
	} {
		bs := newBenchSetupWith(t, tc.src, "10.1.2.3", "203.0.113.9, 10.0.0.2", nil)
		refuse := func() {
			bs.s.decide(bs.ctx, bs.st, bs.rs)
			if bs.rs.d.Verdict != rules.RefuseLimit || !bs.s.refuse(bs.ctx, bs.rs, &bs.rs.d) {
				t.Fatalf("%s: verdict %d, want a refusal", tc.name, bs.rs.d.Verdict)
			}
		}
		refuse()
		if n := testing.AllocsPerRun(200, refuse); n != 0 {
			t.Errorf("%s: the jittered refusal allocates %.1f times per request, want 0", tc.name, n)
		}
		if got := string(bs.ctx.Response.Body()); !strings.Contains(got, tc.body) || bs.ctx.Response.StatusCode() != 503 {
			t.Errorf("%s: answer %d %q, want 503 with %q", tc.name, bs.ctx.Response.StatusCode(), got, tc.body)
		}
		if len(bs.ctx.Response.Header.Peek("Retry-After")) == 0 {
			t.Errorf("%s: no Retry-After", tc.name)
		}
	}
}
