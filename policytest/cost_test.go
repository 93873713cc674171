package policytest

import (
	"strings"
	"testing"
)

// costPolicy charges 2 up front and settles from X-Actual-Cost, 10 a
// minute (fixed_window: no refill within the test's instant).
const costPolicy = `
rule "export" {
  paths       = ["/export"]
  key         = ["ip"]
  algorithm   = "fixed_window"
  limit       = 10
  period      = "1m"
  cost        = 2
  max_cost    = 10
  settle_from = "X-Actual-Cost"
}
rule "batch" {
  paths     = ["/batch"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 10
  period    = "1m"
  cost      = "header:X-Batch"
  max_cost  = 10
}
`

// TestOriginHeadersSettleCost: origin_headers make the simulated origin
// name a request's real cost, and headers declare a client's: a test can
// express both, and fails when the counts are not what the policy says.
func TestOriginHeadersSettleCost(t *testing.T) {
	src := costPolicy + `
test "settled" {
  request {
    path           = "/export"
    origin_headers = { "X-Actual-Cost" = "9" }
    expect         = "allow"
  }
  request {
    path   = "/export"
    expect = "deny"
    rule   = "export"
  }
}
test "refunded" {
  request {
    path           = "/export"
    origin_headers = { "X-Actual-Cost" = "0" }
    repeat         = 6
    expect         = "allow"
  }
}
test "declared" {
  request {
    path    = "/batch"
    headers = { "X-Batch" = "4" }
    repeat  = 2
    expect  = "allow"
  }
  request {
    path    = "/batch"
    headers = { "X-Batch" = "3" }
    expect  = "deny"
    rule    = "batch"
  }
  request {
    path    = "/batch"
    headers = { "X-Batch" = ["0", "-5"] }
    repeat  = 2
    expect  = "allow"
  }
  request {
    path    = "/batch"
    expect  = "deny"
    rule    = "batch"
  }
}
test "no settle: the estimate stands" {
  request {
    path   = "/export"
    repeat = 5
    expect = "allow"
  }
  request {
    path   = "/export"
    expect = "allow"
  }
}
`
	failed, out := runSrc(t, src, runOptions{})
	if failed != 1 {
		t.Fatalf("got %d failed, want 1 (the last test):\n%s", failed, out)
	}
	for _, w := range []string{"PASS settled\n", "PASS refunded\n", "PASS declared\n", "FAIL policies.hcl:73: no settle: the estimate stands: request 2: got deny"} {
		if !strings.Contains(out, w) {
			t.Errorf("output:\n%s\nwant %q", out, w)
		}
	}
}
