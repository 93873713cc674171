package shed_test

import (
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/behaviour/shed"
	"github.com/edge-gateway/edge/builtin"
)

// TestShedCompile: load_shedding's and priority's diagnostics, each at
// the attribute it is about.
func TestShedCompile(t *testing.T) {
	rule := func(extra string) string {
		return "rule \"r\" {\n  paths = [\"/x\"]\n  key = [\"ip\"]\n  limit = 5\n  period = \"1m\"\n" + extra + "\n}\n"
	}
	edge := func(body string) string { return "edge {\n  load_shedding {\n" + body + "\n  }\n}\n" }
	for _, tc := range []struct {
		name, src, want string
		warn            bool
	}{
		{"bad priority", edge("max_in_flight = 5") + rule(`priority = "urgent"`), `"urgent" is not a priority`, false},
		{"priority on skip", edge("max_in_flight = 5") + "rule \"s\" {\n  paths = [\"/x\"]\n  action = \"skip\"\n  skip = [\"*\"]\n  priority = \"low\"\n}\n", "skip rule", false},
		{"zero ceiling", edge("max_in_flight = 0") + rule(""), "max_in_flight is the node's requests at the origin", false},
		{"bad share", edge(`max_in_flight = 5
    shed_at = { low = "0%" }`) + rule(""), "percentage over 0%", false},
		{"not a percentage", edge(`max_in_flight = 5
    shed_at = { low = 50 }`) + rule(""), "percentage over 0%", false},
		{"critical share", edge(`max_in_flight = 5
    shed_at = { critical = "95%" }`) + rule(""), "critical is shed only at the capacity itself", false},
		{"unknown priority", edge(`max_in_flight = 5
    shed_at = { lo = "40%" }`) + rule(""), `"lo" is not a priority`, false},
		{"order", edge(`max_in_flight = 5
    shed_at = { low = "80%", normal = "60%" }`) + rule(""), "low (80%) ≤ normal (60%) ≤ high (90%)", false},
		{"retry_after", edge(`max_in_flight = 5
    retry_after = "soon"`) + rule(""), `retry_after "soon"`, false},
		{"jitter", edge(`max_in_flight = 5
    retry_after_jitter = "150%"`) + rule(""), "retry_after_jitter", false},
		{"jitter under a second", edge(`max_in_flight = 5
    retry_after_jitter = "50%"`) + rule(""), `test.hcl:4,26-31: retry_after_jitter spreads nothing; retry_after_jitter "50%" of retry_after 1s is under a second`, true},
		{"jitter that spreads", edge(`max_in_flight = 5
    retry_after = "2s"
    retry_after_jitter = "50%"`) + rule(`priority = "high"`), "", true},
		{"sheds nothing", edge(``) + rule(""), "no request is ever shed", true},
		{"priority without block", rule(`priority = "high"`), "priority only orders load shedding", true},
		{"under decide_listen", "edge {\n  decide_listen = \"127.0.0.1:18081\"\n  trusted_proxies = [\"127.0.0.1\"]\n  load_shedding {\n    max_in_flight = 5\n  }\n}\n" + rule(""), "holds no slot once answered", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := builtin.Load("test.hcl", []byte(tc.src))
			if diags.HasErrors() == tc.warn {
				t.Fatalf("errors %v, want error %v: %s", diags.HasErrors(), !tc.warn, diags.Error())
			}
			var all []string
			for _, d := range diags {
				all = append(all, d.Error())
			}
			if tc.want == "" && len(all) > 0 {
				t.Fatalf("diagnostics %q, want none", all)
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Fatalf("diagnostics %q do not say %q", all, tc.want)
			}
		})
	}
}

// TestOf: the compiled load_shedding { } (the gateway's Retry-After
// jitter) and what admission reads of it (shed.AdmissionOf), with and
// without the block.
func TestOf(t *testing.T) {
	p, diags := builtin.Load("test.hcl", []byte(`
edge {
  load_shedding {
    max_in_flight      = 8
    shed_at            = { low = "25%" }
    retry_after        = "4s"
    retry_after_jitter = "50%"
  }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	st := shed.Of(p)
	if !st.On || st.MaxInFlight != 8 || st.RetryAfter != 4*time.Second || shed.Jitter(p) != 0.5 || st.Share[shed.PriorityLow] != 250 || st.Share[shed.PriorityNormal] != 750 {
		t.Fatalf("settings %+v, jitter %v", st, shed.Jitter(p))
	}
	if sh := shed.AdmissionOf(p); sh.MaxInFlight != 8 || sh.RetryAfter != 4*time.Second || sh.Share != [shed.NumPriorities]int64{750, 250, 750, 900, 1000} {
		t.Fatalf("admission's %+v", sh)
	}
	p, diags = builtin.Load("test.hcl", []byte(`edge {}`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if st := shed.Of(p); st.On || shed.Jitter(p) != 0 {
		t.Fatalf("without the block: %+v", st)
	}
	if sh := shed.AdmissionOf(p); sh.MaxInFlight != 0 || sh.RetryAfter != shed.DefaultRetryAfter || sh.Share != [shed.NumPriorities]int64{1000, 1000, 1000, 1000, 1000} {
		t.Fatalf("admission's without the block: %+v", sh)
	}
}
