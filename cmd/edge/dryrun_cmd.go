package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// dryRunTimeout bounds `edge dry-run`'s call: the node writes the toggle
// to Redis (within the store's timeout) or to itself.
const dryRunTimeout = 10 * time.Second

// dryRunCmd is `edge dry-run on|off [-rule NAME] [-for 30m] -reason TEXT
// [-admin ADDR] [-actor NAME]`: it asks a running node to put a rule (or,
// with -rule "*", the default, every rule) in dry-run for a while, or to
// end such a toggle (POST /admin/dry-run, with the bearer token in
// $EDGE_ADMIN_TOKEN). With a Redis store the toggle is the fleet's. The
// reason is required and goes to the audit log with the actor (-actor,
// default $USER). "off" ends a toggle only: a rule that the policy puts in
// dry-run stays so, and the command says so. It exits 0 once applied, 1
// when the node refused (an unknown rule) or could not be asked, and 2 on
// bad flags.
func dryRunCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dry-run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", defaultAdmin(), "the node's admin listener HOST:PORT (or http://HOST:PORT; default $EDGE_ADMIN, else "+defaultAdminListen+")")
	rule := fs.String("rule", "*", `the rule's name, or "*" for every rule`)
	dur := fs.String("for", "30m", "how long the toggle lasts, at most 24h (on only)")
	reason := fs.String("reason", "", "why, for the audit log (required)")
	who := fs.String("actor", os.Getenv("USER"), "who, for the audit log")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: edge dry-run on|off [-rule NAME] [-for 30m] -reason TEXT [-admin ADDR] [-actor NAME]")
		fs.PrintDefaults()
	}
	var mode string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if mode == "" && fs.NArg() > 0 {
		// The mode after some flags: `edge dry-run -rule x on -for 1h`.
		mode = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return flagExit(err)
		}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "edge dry-run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if mode != "on" && mode != "off" {
		fs.Usage()
		return 2
	}
	if strings.TrimSpace(*reason) == "" {
		fmt.Fprintln(stderr, "edge dry-run: -reason is required (it goes to the audit log)")
		return 2
	}
	body := map[string]any{"rule": *rule, "dry_run": mode == "on", "reason": *reason}
	if mode == "on" {
		body["for"] = *dur
	}
	b, _ := json.Marshal(body) // cannot fail
	var ans struct {
		Rule   string `json:"rule"`
		DryRun bool   `json:"dry_run"`
		Until  string `json:"until"`
		Error  string `json:"error"`
	}
	if _, code, ok := adminCall("edge dry-run", *admin, "/admin/dry-run", b, *who, dryRunTimeout, &ans, func() string { return ans.Error }, stderr); !ok {
		return code
	}
	name := "rule " + ans.Rule
	if ans.Rule == "*" {
		name = "every rule"
	}
	switch {
	case mode == "on":
		fmt.Fprintf(stdout, "dry-run on: %s until %s\n", name, ans.Until)
	case ans.DryRun:
		fmt.Fprintf(stdout, "dry-run toggle off: %s stays in dry-run (the policy or the -dry-run flag asks for it)\n", name)
	default:
		fmt.Fprintf(stdout, "dry-run off: %s enforces\n", name)
	}
	return 0
}
