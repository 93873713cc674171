package policytest

import (
	"strings"
	"testing"
	"time"
)

// TestQueueTestBlocks: a queue = true rule in a test block decides as its
// bucket does (20 admitted at one instant, the 21st refused), and the run
// does not wait out the holds (run.go's QueueAfter ends them at once): held
// for real, the sequential requests would wait 0.2 + 0.4 + … + 3.8 s = 38 s
// per test, past the 30 s hang guard.
func TestQueueTestBlocks(t *testing.T) {
	src := `
rule "q" {
  paths     = ["/api/*"]
  key       = ["ip"]
  algorithm = "leaky_bucket"
  limit     = 5
  period    = "1s"
  burst     = 20
  queue     = true
}
test "queued" {
  request {
    path   = "/api/x"
    repeat = 20
    expect = "allow"
  }
  request {
    path   = "/api/x"
    expect = "deny"
    rule   = "q"
  }
}
test "wrong" {
  request {
    path   = "/api/x"
    repeat = 21
    expect = "allow"
  }
}
`
	type result struct {
		failed int
		out    string
	}
	done := make(chan result, 1)
	go func() { f, o := runSrc(t, src, runOptions{}); done <- result{f, o} }()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run waited out the queue's holds")
	}
	failed, out := r.failed, r.out
	if failed != 1 || !strings.Contains(out, "PASS queued") || !strings.Contains(out, "FAIL policies.hcl:24: wrong: ") {
		t.Fatalf("failed %d, want only \"wrong\" to fail:\n%s", failed, out)
	}
}
