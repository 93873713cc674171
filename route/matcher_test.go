package route

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// expr parses src as an HCL expression, nil for "".
func expr(t *testing.T, src string) hcl.Expression {
	t.Helper()
	if src == "" {
		return nil
	}
	e, diags := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return e
}

func TestMatcher(t *testing.T) {
	t.Parallel()
	m, diags, ok := Compile(expr(t, `["get", "post"]`), expr(t, `["/login/", "/api/*"]`), expr(t, `["Example.COM:443"]`), false)
	if !ok || diags.HasErrors() {
		t.Fatalf("Compile: %v, %v", ok, diags)
	}
	tests := []struct {
		method, overrides, path, host string
		want                          bool
	}{
		{"GET", "", "/login", "example.com", true},
		{"POST", "", "/api", "example.com", true},
		{"POST", "", "/api/v1/x", "example.com", true},
		{"POST", "", "/apix", "example.com", false},
		{"GET", "", "/login/x", "example.com", false},
		{"GET", "", "/login", "other.example", false},
		{"PUT", "", "/login", "example.com", false},
		{"PUT", "DELETE POST ", "/login", "example.com", true},
		{"PUT", "DELETE ", "/login", "example.com", false},
	}
	for _, tt := range tests {
		if got := m.Match([]byte(tt.method), []byte(tt.overrides), []byte(tt.path), []byte(tt.host)); got != tt.want {
			t.Errorf("Match(%q, %q, %q, %q): got %v, want %v", tt.method, tt.overrides, tt.path, tt.host, got, tt.want)
		}
	}
	if got, want := strings.Join(m.Paths(), " "), "/login /api/*"; got != want {
		t.Errorf("Paths: got %q, want %q", got, want)
	}
	if all, _, _ := Compile(nil, nil, nil, false); !all.Match([]byte("BREW"), nil, []byte("/x"), []byte("h")) || all.Paths() != nil {
		t.Error("a Matcher of no methods, paths or hosts does not match every request")
	}
}

func TestCompileDiagnostics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		methods, paths, hosts string
		want                  string // the diagnostics' summaries
		ok                    bool
	}{
		{`["BREW"]`, ``, ``, "Unusual method", true},
		{`["GE T"]`, ``, ``, "Invalid method", false},
		{``, `["login"]`, ``, "Invalid path", false},
		{``, `["/a*/b"]`, ``, "Invalid path", false},
		{``, `["/*"]`, `["bad host!"]`, "Invalid host", true},
	}
	for _, tt := range tests {
		_, diags, ok := Compile(expr(t, tt.methods), expr(t, tt.paths), expr(t, tt.hosts), false)
		var got []string
		for _, d := range diags {
			got = append(got, d.Summary)
		}
		if strings.Join(got, ", ") != tt.want || ok != tt.ok {
			t.Errorf("Compile(%s, %s, %s): got %v, %v, want %s, %v", tt.methods, tt.paths, tt.hosts, got, ok, tt.want, tt.ok)
		}
	}
}
