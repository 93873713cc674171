package answer_test

import (
	"testing"

	"github.com/edge-gateway/edge/behaviour/answer"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// TestClassify: X-Edge-Outcome, when the origin sends one, wins over the
// status; otherwise the rule's lists decide.
func TestClassify(t *testing.T) {
	failure, success := []int{401, 403}, []int{200, 201, 204}
	tests := []struct {
		status            int
		outcome           string
		failed, succeeded bool
	}{
		{401, "", true, false},
		{200, "", false, true},
		{500, "", false, false},
		{200, "failure", true, false},
		{401, "success", false, true},
		{500, "maybe", false, false},
	}
	for _, tt := range tests {
		var outcome []byte
		if tt.outcome != "" {
			outcome = []byte(tt.outcome)
		}
		if got := answer.IsFailure(failure, tt.status, outcome); got != tt.failed {
			t.Errorf("IsFailure(%d, %q): got %v, want %v", tt.status, tt.outcome, got, tt.failed)
		}
		if got := answer.IsSuccess(success, tt.status, outcome); got != tt.succeeded {
			t.Errorf("IsSuccess(%d, %q): got %v, want %v", tt.status, tt.outcome, got, tt.succeeded)
		}
	}
}

// TestFailuresAndReset: a failures rule keeps only the failures' units, and
// reset_on_success clears them at a success.
func TestFailuresAndReset(t *testing.T) {
	k := rulestest.NewRun(t, rulestest.AccountVisitors+`
rule "failures" {
  key = ["account", "ip"]
  limit = 2
  period = "1h"
  count = "failures"
  failure_status = [401]
  reset_on_success = true
}`)
	for range 3 {
		if v := k.Login("alice", "192.0.2.1", "", 500); v != rules.Forward {
			t.Fatalf("a 500 is no failure: got %v, want forwarded", v)
		}
	}
	k.Login("alice", "192.0.2.1", "", 401)
	k.Login("alice", "192.0.2.1", "", 200) // clears the failure
	k.Login("alice", "192.0.2.1", "", 401)
	k.Login("alice", "192.0.2.1", "", 401)
	if v := k.Login("alice", "192.0.2.1", "", 401); v != rules.RefuseLimit {
		t.Errorf("after two failures since the success: got %v, want refused", v)
	}
}
