package rules_test

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/golden"
	"github.com/edge-gateway/edge/node"
	. "github.com/edge-gateway/edge/rules"
)

var update = flag.Bool("update", false, "rewrite the want sections of testdata/*.txtar")

// repoRoot is the module root, where testdata/fixtures lives.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

func diagLines(diags hcl.Diagnostics) string { return golden.Lines(diags) }

func TestLoadShippedAndFixturePolicies(t *testing.T) {
	root := repoRoot(t)
	for _, name := range []string{
		"policies.hcl",
		"testdata/fixtures/policies/foundation.hcl",
		"testdata/fixtures/policies/visitors.hcl",
		"testdata/fixtures/policies/otp.hcl",
		"testdata/fixtures/policies/login.hcl",
		"testdata/fixtures/policies/bots.hcl",
		"testdata/fixtures/policies/full.hcl",
	} {
		t.Run(name, func(t *testing.T) {
			p, diags := builtin.LoadFile(filepath.Join(root, name))
			if diags.HasErrors() {
				t.Fatalf("got errors:\n%s", diagLines(diags))
			}
			if len(p.Rules) == 0 {
				t.Fatal("got no rules")
			}
		})
	}
}

func TestLoadFoundationCompiles(t *testing.T) {
	p, diags := builtin.LoadFile(filepath.Join(repoRoot(t), "testdata/fixtures/policies/foundation.hcl"))
	if diags.HasErrors() {
		t.Fatalf("got errors:\n%s", diagLines(diags))
	}
	nc := node.Of(p)
	if nc.Listen != "127.0.0.1:18080" || nc.AdminListen != "127.0.0.1:19901" || nc.Upstream != "http://127.0.0.1:19000" {
		t.Errorf("got listen %q admin %q upstream %q", nc.Listen, nc.AdminListen, nc.Upstream)
	}
	if p.IPv6Prefix != 64 || p.IPv4Prefix != 32 || nc.MaxBodyBytes != 65536 || p.ForwardedHeader != "X-Forwarded-For" {
		t.Errorf("got prefixes %d/%d body %d header %q", p.IPv4Prefix, p.IPv6Prefix, nc.MaxBodyBytes, p.ForwardedHeader)
	}
	if nc.Store.Kind != "memory" || nc.Store.MaxKeys != 100000 || p.Keys.MaxKeys != 100000 {
		t.Errorf("got store %+v, keys %+v", nc.Store, p.Keys)
	}
	tests := []struct {
		rule      string
		alg       Algorithm
		limit     int64
		burst     int64
		period    time.Duration
		sensitive bool
		dryRun    bool
		v4, v6    int
		onErr     StoreErrorMode
	}{
		{"trace-fixed-window", FixedWindow, 5, 5, time.Second, false, false, 32, 64, FailOpen},
		{"trace-sliding-log", SlidingLog, 5, 5, time.Second, false, false, 32, 64, FailOpen},
		{"trace-sliding-window", SlidingWindow, 5, 5, time.Second, false, false, 32, 64, FailOpen},
		{"trace-token-bucket", TokenBucket, 5, 5, time.Second, false, false, 32, 64, FailOpen},
		{"trace-leaky-bucket", LeakyBucket, 5, 5, time.Second, false, false, 32, 64, FailOpen},
		{"trace-gcra", GCRA, 5, 5, time.Second, false, false, 32, 64, FailOpen},
		{"login-per-ip", GCRA, 5, 5, time.Minute, true, false, 32, 64, FailClosed},
		{"signup-per-network", SlidingWindow, 3, 3, time.Hour, true, false, 24, 48, FailClosed},
		{"otp-send-per-ip", SlidingLog, 5, 5, 15 * time.Minute, true, false, 32, 64, FailClosed},
		{"api-per-client", GCRA, 10, 10, time.Minute, false, false, 32, 64, FailOpen},
		{"api-shadow-tight", FixedWindow, 2, 2, time.Minute, false, true, 32, 64, FailOpen},
	}
	if len(p.Rules) != len(tests) {
		t.Fatalf("got %d rules, want %d", len(p.Rules), len(tests))
	}
	for i, tt := range tests {
		r := p.Rules[i]
		if r.Name != tt.rule || r.Index != i {
			t.Fatalf("rule %d: got %q (index %d), want %q", i, r.Name, r.Index, tt.rule)
		}
		if r.Algorithm != tt.alg || r.Limit != tt.limit || r.Burst != tt.burst || r.Period != tt.period ||
			r.Sensitive != tt.sensitive || r.DryRun != tt.dryRun || r.IPv4Prefix != tt.v4 || r.IPv6Prefix != tt.v6 || r.OnStoreError != tt.onErr {
			t.Errorf("%s: got %s %d/%d per %s sensitive=%v dry=%v /%d /%d onErr=%d", tt.rule, r.Algorithm, r.Limit, r.Burst, r.Period, r.Sensitive, r.DryRun, r.IPv4Prefix, r.IPv6Prefix, r.OnStoreError)
		}
		if len(r.KeyNames) != 1 || r.KeyNames[0] != "ip" {
			t.Errorf("%s: got key %v, want [ip]", tt.rule, r.KeyNames)
		}
	}
}

// TestBrokenFixtures checks every file of testdata/fixtures/policies/broken
// against the line EXPECTED.md gives for it.
func TestBrokenFixtures(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "testdata/fixtures/policies/broken")
	f, err := os.Open(filepath.Join(dir, "EXPECTED.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| ([a-z-]+\\.hcl) \\| ([0-9]+(?: or [0-9]+)?) \\|")
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n++
		file, lines := m[1], strings.Split(m[2], " or ")
		t.Run(file, func(t *testing.T) {
			path := filepath.Join(dir, file)
			p, diags := builtin.LoadFile(path)
			if !diags.HasErrors() || p != nil {
				t.Fatalf("got no error for %s", file)
			}
			found := false
			for _, d := range diags.Errs() {
				s := d.Error()
				for _, l := range lines {
					if strings.HasPrefix(s, path+":"+l+",") {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("no diagnostic on line %v:\n%s", lines, diagLines(diags))
			}
		})
	}
	if n != 6 {
		t.Fatalf("got %d rows in EXPECTED.md, want 6", n)
	}
}

// TestDiagnosticsGolden runs rules/testdata/*.txtar: each holds a
// policies.hcl and the diagnostics it must produce, one Diagnostic.Error()
// line each (the node's blocks' are node/testdata's). go test -run Golden
// -update rewrites the want sections.
func TestDiagnosticsGolden(t *testing.T) {
	golden.Run(t, "testdata/*.txtar", *update, func(_ *testing.T, filename string, src []byte) hcl.Diagnostics {
		_, diags := builtin.Load(filename, src)
		return diags
	})
}

// TestDiagnosticsOrderIsStable loads a policy with many problems, several
// at one position, again and again: edge validate must print the same
// lines in the same order every run (a map's iteration order once decided
// it).
func TestDiagnosticsOrderIsStable(t *testing.T) {
	src := []byte(`
identity {
  account = ["json:user"]
}
botscore {
}
rule "a" {
  key    = ["phone", "otp_session", "visitor", "account", "asn", "country"]
  period = "soon"
  when {
    bot_score_below = 300
    hosting         = "maybe"
    asn_in          = ["ASX"]
    country_in      = ["us"]
    country_not_in  = ["fr"]
    visitor_valid   = true
    phone_country_in = ["us"]
  }
}
rule "a" {
  key = ["nope"]
}
`)
	_, diags := builtin.Load("p.hcl", src)
	first := diagLines(diags)
	if strings.Count(first, "\n") < 10 {
		t.Fatalf("want many diagnostics, got:\n%s", first)
	}
	for range 50 {
		_, diags := builtin.Load("p.hcl", src)
		if got := diagLines(diags); got != first {
			t.Fatalf("diagnostics changed between runs:\n%s\nthen:\n%s", first, got)
		}
	}
}
