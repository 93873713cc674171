package policytest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/golden"
	"github.com/edge-gateway/edge/rules"
)

var update = flag.Bool("update", false, "rewrite the want sections of testdata/*.txtar")

const fixtures = "../testdata/fixtures/policies/"

// load compiles src as a policy and parses and checks its tests, failing
// t on any diagnostic.
func load(t *testing.T, name string, src []byte) (*rules.Policy, []Test) {
	t.Helper()
	p, diags := builtin.Load(name, src)
	if diags.HasErrors() {
		t.Fatalf("policy: %v", diags)
	}
	tests, diags := Parse(name, src)
	diags = append(diags, Check(p, tests)...)
	if len(diags) > 0 {
		t.Fatalf("tests: %v", diags)
	}
	return p, tests
}

func runSrc(t *testing.T, src string, opts runOptions) (failed int, out string) {
	t.Helper()
	p, tests := load(t, "policies.hcl", []byte(src))
	var buf bytes.Buffer
	fs, err := run(context.Background(), p, tests, &buf, opts)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return len(fs), buf.String()
}

// TestFixtures runs the fixtures with test blocks: every test passes, and
// each gets its PASS line.
func TestFixtures(t *testing.T) {
	for _, name := range []string{"foundation-tested.hcl", "otp-tested.hcl"} {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(fixtures + name)
			if err != nil {
				t.Fatal(err)
			}
			p, tests := load(t, name, src)
			if len(tests) < 3 {
				t.Fatalf("got %d tests, want the fixture's (3 or more)", len(tests))
			}
			var out bytes.Buffer
			failed, err := Run(context.Background(), p, tests, &out)
			if err != nil || failed != 0 {
				t.Fatalf("got failed=%d err=%v, want 0, nil:\n%s", failed, err, out.String())
			}
			for _, tt := range tests {
				if !strings.Contains(out.String(), "PASS "+tt.Name+"\n") {
					t.Errorf("no PASS line for %q in:\n%s", tt.Name, out.String())
				}
			}
		})
	}
}

// TestWrongExpectationFails flips one expectation of each kind in a copy
// of a fixture: the test fails, naming the request and what the edge did.
func TestWrongExpectationFails(t *testing.T) {
	tests := []struct {
		name, fixture, old, new string
		want                    string
	}{{
		name: "reject expected as allow", fixture: "otp-tested.hcl",
		old:  `json   = { phone = "call me maybe" }` + "\n    expect = \"reject\"",
		new:  `json   = { phone = "call me maybe" }` + "\n    expect = \"allow\"",
		want: `FAIL policies.hcl:171: an unparseable phone number is rejected, not forwarded: request 1: got reject by "otp-send-per-phone", "otp-send-per-range" and "otp-send-countries", want allow` + "\n",
	}, {
		name: "allow expected as deny, in a repeat", fixture: "foundation-tested.hcl",
		old:  "from   = \"203.0.113.7\"\n    repeat = 5\n    expect = \"allow\"",
		new:  "from   = \"203.0.113.7\"\n    repeat = 5\n    expect = \"deny\"",
		want: `FAIL policies.hcl:128: a login flood from one client: five pass, the sixth is refused, a minute later one more: request 1 (repeat 1 of 5): got allow, want deny` + "\n",
	}, {
		name: "deny by the wrong rule", fixture: "otp-tested.hcl",
		old:  `rule   = "otp-verify-per-session"`,
		new:  `rule   = "otp-verify-per-phone"`,
		want: `FAIL policies.hcl:190: five wrong codes burn a code; a new code gets five more, within the phone's ceiling: request 2: got deny by "otp-verify-per-session", want deny by "otp-verify-per-phone"` + "\n",
	}, {
		name: "dry-run deny expected as allow", fixture: "foundation-tested.hcl",
		old:  "expect = \"dry_run_deny\"\n    rule   = \"api-shadow-tight\"",
		new:  `expect = "allow"`,
		want: `FAIL policies.hcl:181: the shadow rule would refuse but never does: request 2: got dry_run_deny by "api-shadow-tight", want allow` + "\n",
	}, {
		name: "a clock that does not move far enough", fixture: "foundation-tested.hcl",
		old:  `after  = "12s"`,
		new:  `after  = "11s"`,
		want: `FAIL policies.hcl:142: a login flood from one client: five pass, the sixth is refused, a minute later one more: request 3: got deny by "login-per-ip", want allow` + "\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := os.ReadFile(fixtures + tt.fixture)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Count(src, []byte(tt.old)) != 1 {
				t.Fatalf("%q is not once in %s", tt.old, tt.fixture)
			}
			failed, out := runSrc(t, strings.Replace(string(src), tt.old, tt.new, 1), runOptions{})
			if failed != 1 {
				t.Errorf("got %d failed, want 1", failed)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("output:\n%s\nwant a line:\n%s", out, tt.want)
			}
		})
	}
}

const headerPolicy = `
edge {
  listen   = "127.0.0.1:18080"
  upstream = "http://127.0.0.1:19000"
}

rule "per-key" {
  paths  = ["/api/*"]
  key    = ["header:X-Api-Key"]
  limit  = 1
  period = "1m"
}
`

// TestHeadersInOrder: the origin receives a request's headers in the order
// its block writes them, and of two lines of one header the edge counts
// the first written, as it counts a client's.
func TestHeadersInOrder(t *testing.T) {
	src := headerPolicy + `
test "headers in order" {
  request {
    path    = "/api/a"
    headers = { "Zeta" = "1", "X-Api-Key" = "first", "Alpha" = ["2", "3"], "X-Api-Key" = "second", "Mid" = "4" }
    expect  = "allow"
  }
  request {
    path    = "/api/a"
    headers = { "X-Api-Key" = "second" }
    expect  = "allow"
  }
  request {
    path    = "/api/a"
    headers = { "X-Api-Key" = "first" }
    expect  = "deny"
    rule    = "per-key"
  }
}
`
	var seen [][]string
	failed, out := runSrc(t, src, runOptions{origin: func(ctx *fasthttp.RequestCtx) {
		var h []string
		for k, v := range ctx.Request.Header.All() {
			switch string(k) {
			case "Zeta", "X-Api-Key", "Alpha", "Mid":
				h = append(h, string(k)+": "+string(v))
			}
		}
		seen = append(seen, h)
	}})
	if failed != 0 {
		t.Fatalf("got %d failed:\n%s", failed, out)
	}
	want := []string{"Zeta: 1", "X-Api-Key: first", "Alpha: 2", "Alpha: 3", "X-Api-Key: second", "Mid: 4"}
	if len(seen) != 2 || strings.Join(seen[0], "|") != strings.Join(want, "|") {
		t.Fatalf("origin saw %q, want first %q (and 2 requests)", seen, want)
	}
}

// TestReject: a request the edge cannot read one way only (an HTTP/1.1
// request with an empty Host, RFC 9112 §3.2) is a reject without any rule.
func TestReject(t *testing.T) {
	src := headerPolicy + `
test "empty host" {
  request {
    path    = "/api/a"
    headers = { Host = "" }
    expect  = "reject"
  }
  request {
    path    = "/api/a"
    headers = { Host = "" }
    expect  = "allow"
  }
}
`
	failed, out := runSrc(t, src, runOptions{})
	want := "PASS"
	if failed != 1 || strings.Contains(out, want) {
		t.Fatalf("got %d failed, want 1:\n%s", failed, out)
	}
	if w := "FAIL policies.hcl:20: empty host: request 2: got reject, want allow\n"; !strings.Contains(out, w) {
		t.Fatalf("output:\n%s\nwant %q", out, w)
	}
}

// failingStore is a store whose every call fails, as a Redis that is down.
type failingStore struct{}

var errDown = errors.New("store down")

func (failingStore) Take(context.Context, time.Time, []rules.Op, []rules.Result) error {
	return errDown
}
func (failingStore) Close() error { return nil }

// TestErrorDeny: with a store that fails, a sensitive rule (fail closed by
// default) answers 503, error_deny, and an ordinary one forwards.
func TestErrorDeny(t *testing.T) {
	src := headerPolicy + `
rule "login" {
  methods   = ["POST"]
  paths     = ["/login"]
  key       = ["ip"]
  limit     = 5
  period    = "1m"
  sensitive = true
}

test "store down" {
  request {
    method = "POST"
    path   = "/login"
    expect = "error_deny"
    rule   = "login"
  }
  request {
    path    = "/api/x"
    headers = { "X-Api-Key" = "k" }
    expect  = "allow"
  }
  request {
    method = "POST"
    path   = "/login"
    expect = "deny"
  }
}
`
	failed, out := runSrc(t, src, runOptions{newStore: func(*rules.Policy) (rules.Store, error) { return failingStore{}, nil }})
	if w := "FAIL policies.hcl:35: store down: request 3: got error_deny by \"login\", want deny\n"; failed != 1 || !strings.Contains(out, w) {
		t.Fatalf("got %d failed, output:\n%s\nwant 1 and %q", failed, out, w)
	}
}

// TestVisitor: requests of one named visitor share its signed cookie's
// bucket; another visitor has its own.
func TestVisitor(t *testing.T) {
	src := `
edge {
  listen   = "127.0.0.1:18080"
  upstream = "http://127.0.0.1:19000"
}

visitor {
  secure = false
}

rule "per-visitor" {
  paths  = ["/v"]
  key    = ["visitor"]
  limit  = 2
  period = "1m"
}

test "visitors" {
  request {
    path    = "/v"
    visitor = "alice"
    cookies = { theme = "dark" }
    repeat  = 2
    expect  = "allow"
  }
  request {
    path    = "/v"
    visitor = "alice"
    expect  = "deny"
    rule    = "per-visitor"
  }
  request {
    path    = "/v"
    visitor = "bob"
    expect  = "allow"
  }
}
`
	t.Setenv("EDGE_VISITOR_SECRETS", "")
	var cookies []string
	failed, out := runSrc(t, src, runOptions{origin: func(ctx *fasthttp.RequestCtx) {
		cookies = append(cookies, string(ctx.Request.Header.Cookie("theme")))
	}})
	if failed != 0 {
		t.Fatalf("got %d failed:\n%s", failed, out)
	}
	if len(cookies) != 3 || cookies[0] != "dark" {
		t.Fatalf("origin saw theme cookies %q, want dark first (3 requests)", cookies)
	}
	if v := os.Getenv("EDGE_VISITOR_SECRETS"); v != "" {
		t.Errorf("the run left $EDGE_VISITOR_SECRETS set to %q", v)
	}
}

// TestDiagnosticsGolden runs testdata/*.txtar: each holds a
// -- policies.hcl -- with test blocks and the -- want -- diagnostics of
// Parse and Check, one Diagnostic.Error() line each. go test -run Golden
// -update rewrites the want sections.
func TestDiagnosticsGolden(t *testing.T) {
	golden.Run(t, "testdata/*.txtar", *update, func(t *testing.T, filename string, src []byte) hcl.Diagnostics {
		p, diags := builtin.Load(filename, src)
		if diags.HasErrors() {
			t.Fatalf("policy: %v", diags)
		}
		tests, diags := Parse(filename, src)
		return append(diags, Check(p, tests)...)
	})
}
