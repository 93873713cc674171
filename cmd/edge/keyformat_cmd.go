package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// migrationMargin is added to a policy's longest key lifetime to make a
// migration window: the time every running node takes to read the new
// format (keyFormatStale, twice over) and a minute of clock skew between
// the nodes, whose own clocks end the window.
const migrationMargin = 2*keyFormatStale + time.Minute

// keyFormatCmd is `edge key-format [-config FILE] [-store URL] status` and
// `… migrate [-window D]` (docs/deploying.md, "Key format and rolling
// upgrades"). status prints the fleet's key format as Redis holds it.
// migrate starts a format 1 fleet's move to format 2, once every node runs
// a version that knows key formats: for the window (at least the policy's
// longest key lifetime plus migrationMargin) every node applies each op in
// both formats, then format 2 alone. It needs the fleet's key secret in
// the policy's key_secret_env (only its fingerprint is compared). It exits
// 0 when done (or already done), 1 when Redis refused or could not be
// asked, and 2 on bad flags.
func keyFormatCmd(args []string, stdout, stderr io.Writer) int {
	return keyFormatRun(args, stdout, stderr, time.Now)
}

func keyFormatRun(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	fs := flag.NewFlagSet("key-format", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "policies.hcl", "the fleet's policy file (its store, its key_secret_env and its rules' lifetimes)")
	storeURL := fs.String("store", "", "the fleet's Redis URL, instead of the policy's store block")
	window := fs.Duration("window", 0, "migrate: the migration window (default and minimum: the policy's longest key lifetime plus "+migrationMargin.String()+")")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	verb := fs.Arg(0)
	if fs.NArg() != 1 || (verb != "status" && verb != "migrate") {
		fmt.Fprintln(stderr, "usage: edge key-format [-config FILE] [-store URL] [-window D] status|migrate")
		return 2
	}
	p, diags := builtin.LoadFile(*config)
	printDiags(stderr, *config, diags)
	if diags.HasErrors() {
		fmt.Fprintf(stderr, "edge key-format: %s has errors\n", *config)
		return 1
	}
	nc := node.Of(p)
	minWindow := p.LongestKeyLifetime() + migrationMargin
	if verb == "migrate" && *window != 0 && *window < minWindow {
		fmt.Fprintf(stderr, "edge key-format: -window %v is shorter than the policy's longest key lifetime plus %v (%v): a node on format 2 alone would miss a counter, ban or lockout a format 1 key still holds\n", *window, migrationMargin, minWindow)
		return 2
	}
	secret := []byte(os.Getenv(nc.KeySecretEnv))
	url := nc.Store.URL
	if *storeURL != "" {
		if err := node.ValidateStoreURL(*storeURL); err != nil {
			fmt.Fprintln(stderr, "edge key-format: -store:", err)
			return 2
		}
		url = *storeURL
	}
	if nc.Store.Kind != "redis" && *storeURL == "" {
		fmt.Fprintln(stderr, "edge key-format: the policy's store is not redis: a memory store is node-local and always on format 2")
		return 1
	}
	if len(secret) == 0 {
		fmt.Fprintf(stderr, "edge key-format: the fleet's key secret is not in $%s\n", nc.KeySecretEnv)
		return 1
	}
	opts, err := redisOptions(nc.Store, url)
	if err != nil {
		fmt.Fprintln(stderr, "edge key-format:", err)
		return 1
	}
	rs, err := redisstore.New(opts)
	if err != nil {
		fmt.Fprintln(stderr, "edge key-format: creating redis store:", err)
		return 1
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*fingerprintTimeout)
	defer cancel()
	fp := keyFingerprint(secret)
	held, err := rs.ReadKeyFormat(ctx)
	switch {
	case errors.Is(err, redis.Nil):
		fmt.Fprintln(stdout, "no fleet: redis holds no key fingerprint (the first node claims format 2)")
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "edge key-format:", err)
		return 1
	case held.Fingerprint != fp:
		fmt.Fprintf(stderr, "edge key-format: the key secret in $%s is not the fleet's (fingerprint %s, redis holds %s)\n", nc.KeySecretEnv, fp[:16], held.Fingerprint[:min(16, len(held.Fingerprint))])
		return 1
	}
	t := now()
	if verb == "status" || held.Format == rules.KeyFormat2 {
		printKeyFormat(stdout, held, t)
		return 0
	}
	w := max(*window, minWindow)
	held, err = rs.MigrateKeyFormat(ctx, fp, t.Add(w))
	if err != nil {
		fmt.Fprintln(stderr, "edge key-format:", err)
		return 1
	}
	if held.Format == rules.KeyFormat1 {
		fmt.Fprintf(stdout, "migrating to key format 2: every node applies each counter op in both formats until %s (a window of %v), then format 2 alone; nodes read it within %v\n", t.Add(w).UTC().Format(time.RFC3339), w, keyFormatPoll)
		return 0
	}
	printKeyFormat(stdout, held, t) // another migrate won the race
	return 0
}

// printKeyFormat prints what Redis holds, at t.
func printKeyFormat(w io.Writer, f redisstore.FleetKeyFormat, t time.Time) {
	switch {
	case f.Format == rules.KeyFormat1:
		fmt.Fprintln(w, "key format 1 (HMAC-SHA256): run edge key-format migrate once no node older than key formats is left")
	case t.Before(f.DualUntil):
		fmt.Fprintf(w, "key format 2, migrating: each counter op applied in both formats until %s (%v left)\n", f.DualUntil.UTC().Format(time.RFC3339), f.DualUntil.Sub(t).Round(time.Second))
	case !f.DualUntil.IsZero():
		fmt.Fprintf(w, "key format 2 (SipHash-2-4); the migration ended %s\n", f.DualUntil.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintln(w, "key format 2 (SipHash-2-4)")
	}
}
