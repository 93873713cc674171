package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// reloadTimeout bounds `edge reload`'s call: a reload runs the policy's
// test blocks before it answers, on a simulated clock, which takes
// milliseconds for the shipped policies; a minute leaves room for large
// suites on a loaded node.
const reloadTimeout = time.Minute

// reloadCmd is `edge reload [-admin ADDR]`: it asks a running node to
// reload its policy file (POST /admin/reload, with the bearer token in
// $EDGE_ADMIN_TOKEN) and prints the answer: "reloaded: N rules" and one
// line per warning on stdout, or each diagnostic and warning of a refused
// reload on stderr (among them the certificate renewed on disk that
// serves although the policy was refused). It exits 0 once reloaded, 1 when the node refused the file (422)
// or could not be asked, and 2 on bad flags.
func reloadCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", defaultAdmin(), "the node's admin listener HOST:PORT (or http://HOST:PORT; default $EDGE_ADMIN, else "+defaultAdminListen+")")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "edge reload: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var ans struct {
		Status      string   `json:"status"`
		Rules       int      `json:"rules"`
		Warnings    []string `json:"warnings"`
		Diagnostics []string `json:"diagnostics"`
		Error       string   `json:"error"`
	}
	reply, code, err := adminPost(*admin, "/admin/reload", []byte("{}"), "", reloadTimeout, &ans)
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "edge reload:", err)
		return code
	case reply.Code == http.StatusOK:
		fmt.Fprintf(stdout, "reloaded: %d rules\n", ans.Rules)
		for _, w := range ans.Warnings {
			fmt.Fprintln(stdout, "warning:", w)
		}
		return 0
	case reply.Code == http.StatusUnprocessableEntity:
		fmt.Fprintf(stderr, "refused: the node keeps its running policy (%d rules)\n", ans.Rules)
		for _, d := range ans.Diagnostics {
			fmt.Fprintln(stderr, d)
		}
		for _, w := range ans.Warnings { // a renewed certificate serves all the same
			fmt.Fprintln(stderr, "warning:", w)
		}
		return 1
	}
	fmt.Fprintf(stderr, "edge reload: %s answered %s: %s\n", reply.URL, reply.Status, ans.Error)
	return 1
}
