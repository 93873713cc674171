package main

import (
	"fmt"
	"io"
)

// commands are edge's commands and what each does, in the order `edge -h`
// lists them.
var commands = [...]struct{ name, what string }{
	{"serve", "run the node: the public and admin listeners and the proxy (the default command)"},
	{"validate", "check a policy file and print its diagnostics; exit 1 on an error"},
	{"test", "run a policy file's test blocks"},
	{"fmt", "format policy files (-l lists the unformatted ones, -w rewrites them)"},
	{"reload", "have the running node reload its policy (POST /admin/reload)"},
	{"dry-run", "put a rule, or the node, in dry-run for a while, or end that (POST /admin/dry-run)"},
	{"forgive", "clear an identity's counters, bans and lockouts on every rule keyed on it, fleet-wide (POST /admin/forgive)"},
	{"explain", "what the node would decide for a request, consuming nothing (POST /admin/explain)"},
	{"demo-origin", "run the demo origin alone"},
	{"health", "probe the node's /readyz (-live: /healthz), for a HEALTHCHECK without curl"},
	{"key-format", "show or migrate the fleet's key format in Redis"},
	{"version", "print the module version, commit and build time"},
}

// usage is `edge -h`: the commands, then the flags of serve, the default
// command (its own usage, as `edge serve -h` prints it). Each command's
// flags are `edge CMD -h`.
func usage(w io.Writer) int {
	fmt.Fprintf(w, "usage: edge [COMMAND] [flags]   (edge COMMAND -h lists a command's flags)\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.what)
	}
	fmt.Fprintln(w)
	return serve([]string{"-h"}, w)
}
