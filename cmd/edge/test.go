package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/policytest"
	"github.com/edge-gateway/edge/rules"
)

// test is `edge test [-config F]`: it runs the policy's test blocks
// (policytest) and prints one line per test and a summary. It exits 0 when
// every test passes, 1 when one fails (or the tests could not run) and 2
// on a broken file or flags.
func test(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "policies.hcl", "policy file whose test blocks to run")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		*config = fs.Arg(0)
	}
	p, diags := builtin.LoadFile(*config)
	if diags.HasErrors() {
		printDiags(stderr, *config, diags)
		return 2
	}
	tests, tdiags := parseTests(*config, p)
	diags = append(diags, tdiags...)
	printDiags(stderr, *config, diags)
	if diags.HasErrors() {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed, err := policytest.Run(ctx, p, tests, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "edge test:", err)
		return 1
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// parseTests reads the test blocks of the policy file path, compiled as p,
// and checks them against it. With p nil (the policy has errors) it
// reports the test blocks' own errors only, and nothing when the file does
// not parse or cannot be read (the policy's diagnostics say so already).
func parseTests(path string, p *rules.Policy) ([]policytest.Test, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		if p == nil {
			return nil, nil
		}
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read policy", Detail: err.Error()}}
	}
	if p == nil {
		if _, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos); diags.HasErrors() {
			return nil, nil
		}
	}
	tests, diags := policytest.Parse(path, src)
	if p == nil {
		return tests, diags
	}
	return tests, append(diags, policytest.Check(p, tests)...)
}

// sortDiags orders diagnostics by position, as a reader meets them: those
// without a position first, and those at one position in the order found.
func sortDiags(diags hcl.Diagnostics) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		switch {
		case a.Subject == nil || b.Subject == nil:
			return cmp.Compare(boolInt(a.Subject != nil), boolInt(b.Subject != nil))
		}
		return cmp.Or(cmp.Compare(a.Subject.Start.Line, b.Subject.Start.Line), cmp.Compare(a.Subject.Start.Column, b.Subject.Start.Column))
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
