package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// defaultAdminListen is the policy language's default admin_listen
// (node.DefaultAdminListen, node.Config.AdminListen), which `edge health` probes when neither
// -admin nor -config names another.
const defaultAdminListen = "127.0.0.1:9901"

// healthCmd is `edge health [-admin HOST:PORT | -config FILE] [-strict |
// -live] [-timeout 2s]`: a readiness probe for a container's HEALTHCHECK, which
// has no curl (docs/deploying.md, "Container image and systemd unit"). It
// GETs /readyz on the node's admin listener (/readyz?strict=1 with
// -strict) and exits 0 when the node answers 2xx, 1 when it answers
// anything else or cannot be reached within the timeout, and 2 on bad
// flags. The admin address is -admin, else -config's admin_listen (read
// alone: errors elsewhere in the file do not fail the probe,
// adminListenOf), else $EDGE_ADMIN, else 127.0.0.1:9901; an
// unspecified host (0.0.0.0, ::, none) is probed on loopback, as a probe
// inside the node's host or container does. /readyz needs no admin token.
//
// Without -strict a node whose store is down is ready ("degraded", exit
// 0, the reason printed): a fleet sharing one sick Redis must not be
// restarted or pulled out all at once (docs/architecture.md, "The admin
// listener"). -strict fails it. A node whose store refuses it (a wrong
// password, an ACL: every rule that fails closed answers 503) is not
// ready, -strict or not (exit 1, the refusal printed).
//
// -live is the liveness probe instead: it GETs /healthz, which answers
// 200 while the process serves its admin listener, whatever its store
// says, so that a node that is not ready is not also restarted
// (docs/deploying.md, "The container image").
func healthCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: edge health [-admin HOST:PORT | -config FILE] [-strict | -live] [-timeout 2s]\n\nexit 0 when the node's /readyz (/healthz with -live) answers 2xx, 1 when not, 2 on bad flags\n\nflags of health:\n")
		fs.PrintDefaults()
	}
	admin := fs.String("admin", "", "the node's admin listener HOST:PORT or http://HOST:PORT (default the policy's admin_listen with -config, else $EDGE_ADMIN, else "+defaultAdminListen+")")
	config := fs.String("config", "", "policy file whose admin_listen to probe (ignored with -admin)")
	strict := fs.Bool("strict", false, "not ready while the store is degraded (/readyz?strict=1)")
	live := fs.Bool("live", false, "probe liveness (/healthz: the process answers) instead of readiness")
	timeout := fs.Duration("timeout", 2*time.Second, "give up on a node that has not answered after this long")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "edge health: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *live && *strict {
		fmt.Fprintln(stderr, "edge health: -live and -strict do not go together (-strict is about readiness)")
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "edge health: -timeout must be positive, got %v\n", *timeout)
		return 2
	}
	addr := *admin
	if addr == "" && *config != "" {
		var err error
		if addr, err = adminListenOf(*config); err != nil {
			// The node may be serving a policy it loaded before the file
			// broke (a refused reload keeps it): probe the default.
			fmt.Fprintf(stderr, "edge health: %v; probing %s\n", err, defaultAdminListen)
		}
	}
	if addr == "" {
		addr = defaultAdmin()
	}
	u, err := readyzURL(addr, *strict)
	if err != nil {
		fmt.Fprintln(stderr, "edge health:", err)
		return 2
	}
	if *live {
		u = strings.TrimSuffix(u, "/readyz") + "/healthz"
	}
	return probeReadyz(u, *timeout, stdout, stderr)
}

// adminListenOf reads the admin_listen of the policy file at path, and
// nothing else: the file may hold errors a running node refused at a
// reload (it keeps serving the policy it had, /readyz 200), and a probe
// that failed on them would have every healthy node restarted over one
// typo, none of which could then start. "" when the edge block sets none
// (the default applies); an error when the file cannot be read or
// admin_listen is not a string literal.
func adminListenOf(path string) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading %s for its admin_listen: %w", path, err)
	}
	f, _ := hclsyntax.ParseConfig(src, path, hcl.InitialPos) // a partial body on syntax errors
	if f == nil {
		return "", fmt.Errorf("%s does not parse: its admin_listen is unknown", path)
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return "", fmt.Errorf("%s does not parse: its admin_listen is unknown", path)
	}
	for _, b := range body.Blocks {
		if b.Type != "edge" {
			continue
		}
		a, ok := b.Body.Attributes["admin_listen"]
		if !ok {
			return "", nil
		}
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
			return "", fmt.Errorf("%s: admin_listen at %s is not a string", path, a.SrcRange)
		}
		return v.AsString(), nil
	}
	return "", nil
}

// readyzURL is the /readyz URL on the admin listener admin (HOST:PORT or
// http://HOST:PORT), with an unspecified host replaced by loopback
// (127.0.0.1, or ::1 for ::).
func readyzURL(admin string, strict bool) (string, error) {
	hostport := strings.TrimSuffix(strings.TrimPrefix(admin, "http://"), "/")
	if strings.Contains(hostport, "://") || strings.Contains(hostport, "/") {
		return "", fmt.Errorf("-admin %q: want HOST:PORT or http://HOST:PORT (the admin listener speaks plain HTTP)", admin)
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("-admin %q: %v", admin, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	u := "http://" + net.JoinHostPort(host, port) + "/readyz"
	if strict {
		u += "?strict=1"
	}
	return u, nil
}

// probeReadyz GETs u once and reports the node's readiness (its liveness
// for /healthz): exit 0 on a 2xx answer, 1 otherwise. The answer's JSON
// body ({"status": "ok", "degraded" or "unready", "reason": …}; /healthz's
// "ok") is what it prints: on stdout when ready, on stderr when not.
func probeReadyz(u string, timeout time.Duration, stdout, stderr io.Writer) int {
	ready, notReady := "ready", "not ready"
	if strings.HasSuffix(u, "/healthz") {
		ready, notReady = "live", "not live"
	}
	// No proxy (a probe of the node's own admin listener never goes
	// through $HTTP_PROXY) and no kept connection.
	client := &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	resp, err := client.Get(u)
	if err != nil {
		why := err.Error()
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			why = "connection refused: nothing listens there (is edge serve running, with this admin_listen?)"
		case isTimeout(err):
			why = fmt.Sprintf("no answer within %v", timeout)
		}
		fmt.Fprintf(stderr, "edge health: %s: %s: %s\n", notReady, u, why)
		return 1
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	said := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &body) == nil && body.Status != "" {
		said = body.Status
		if body.Reason != "" {
			said += ": " + body.Reason
		}
	}
	if resp.StatusCode/100 == 2 {
		fmt.Fprintf(stdout, "%s (%s)\n", ready, said)
		return 0
	}
	fmt.Fprintf(stderr, "edge health: %s: %s answered %s: %s\n", notReady, u, resp.Status, said)
	return 1
}

// isTimeout reports whether err is a timeout (the client's, or a dial's).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
