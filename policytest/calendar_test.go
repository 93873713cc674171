package policytest

import (
	"strings"
	"testing"
	_ "time/tzdata" // Europe/Paris, whatever the host has installed
)

// TestCalendarQuotaTestBlocks: edge test's simulated clock starts at
// 2026-01-01 00:00 UTC (run.go's epoch), 01:00 in Paris, so a daily quota
// in Paris ends 23 hours later, at midnight there, while one in UTC lasts
// the whole 24; and a monthly one ends on 1 February, 31 days on. The
// last test expects the Paris day to outlast its midnight and must fail.
func TestCalendarQuotaTestBlocks(t *testing.T) {
	src := `
rule "daily-paris" {
  paths     = ["/paris"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 2
  period    = "day"
  time_zone = "Europe/Paris"
}
rule "daily-utc" {
  paths     = ["/utc"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 2
  period    = "day"
}
rule "monthly" {
  paths     = ["/month"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 1
  period    = "month"
}
test "paris day" {
  request {
    path   = "/paris"
    repeat = 2
    expect = "allow"
  }
  request {
    after  = "22h59m59s"
    path   = "/paris"
    expect = "deny"
    rule   = "daily-paris"
  }
  request {
    after  = "1s"
    path   = "/paris"
    repeat = 2
    expect = "allow"
  }
}
test "utc day" {
  request {
    path   = "/utc"
    repeat = 2
    expect = "allow"
  }
  request {
    after  = "23h"
    path   = "/utc"
    expect = "deny"
    rule   = "daily-utc"
  }
  request {
    after  = "1h"
    path   = "/utc"
    expect = "allow"
  }
}
test "month" {
  request {
    path   = "/month"
    expect = "allow"
  }
  request {
    after  = "743h59m59s"
    path   = "/month"
    expect = "deny"
    rule   = "monthly"
  }
  request {
    after  = "1s"
    path   = "/month"
    expect = "allow"
  }
}
test "wrong: the paris day outlasts its midnight" {
  request {
    path   = "/paris"
    repeat = 2
    expect = "allow"
  }
  request {
    after  = "23h"
    path   = "/paris"
    expect = "deny"
    rule   = "daily-paris"
  }
}
`
	failed, out := runSrc(t, src, runOptions{})
	if failed != 1 {
		t.Fatalf("got %d failed, want 1 (the last test):\n%s", failed, out)
	}
	for _, w := range []string{"PASS paris day\n", "PASS utc day\n", "PASS month\n", "FAIL policies.hcl:84: wrong: the paris day outlasts its midnight: request 2: got allow"} {
		if !strings.Contains(out, w) {
			t.Errorf("output:\n%s\nwant %q", out, w)
		}
	}
}
