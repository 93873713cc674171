package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/hcl/v2"

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
// and checks them against it.
func parseTests(path string, p *rules.Policy) ([]policytest.Test, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read policy", Detail: err.Error()}}
	}
	tests, diags := policytest.Parse(path, src)
	return tests, append(diags, policytest.Check(p, tests)...)
}
