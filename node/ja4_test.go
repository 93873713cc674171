package node_test

import (
	"strings"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/node"
)

func TestJA4Header(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{`ja4_header = "x-ja4"`, "X-Ja4", ""},
		{`ja4_header = "CloudFront-Viewer-JA4-Fingerprint"`, "Cloudfront-Viewer-Ja4-Fingerprint", ""},
		{`ja4_header = ""`, "", "Invalid ja4_header"},
		{`ja4_header = "X JA4"`, "", "Invalid ja4_header"},
		{`ja4_header = "X-JA4:"`, "", "Invalid ja4_header"},
		{`ja4_header = "X-Edge-JA4"`, "", "sets, strips or reads"},
		{`ja4_header = "X-Forwarded-For"`, "", "sets, strips or reads"},
		{`ja4_header = "host"`, "", "sets, strips or reads"},
	}
	for _, tt := range tests {
		p, diags := builtin.Load("policies.hcl", []byte("edge {\n  "+tt.in+"\n}\n"))
		switch {
		case tt.err != "":
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tt.err) {
				t.Errorf("%s: got %v, want an error with %q", tt.in, diags, tt.err)
			}
		case diags.HasErrors():
			t.Errorf("%s: %v", tt.in, diags)
		case node.Of(p).JA4Header != tt.want:
			t.Errorf("%s: got %q, want %q", tt.in, node.Of(p).JA4Header, tt.want)
		}
	}
	if p, _ := builtin.Load("policies.hcl", []byte("edge {}\n")); node.Of(p).JA4Header != "" {
		t.Errorf("no ja4_header: got %q", node.Of(p).JA4Header)
	}
}
