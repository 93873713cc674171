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

// forgiveTimeout bounds `edge forgive`'s call: the node clears one key
// per rule keyed on the identity, each a store call within the store's
// timeout.
const forgiveTimeout = 30 * time.Second

// keyFlags is a repeatable -key NAME=VALUE flag.
type keyFlags map[string]string

func (k keyFlags) String() string { return "" }

func (k keyFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("%q is not NAME=VALUE (such as header:X-Api-Key=k-123)", v)
	}
	k[strings.TrimSpace(name)] = value
	return nil
}

// forgiveCmd is `edge forgive [-account A] [-ip IP] [-phone P] [-visitor
// COOKIE -visitor-ip IP] [-key NAME=VALUE]... [-rule NAME] [-for 1h]
// -reason TEXT [-admin ADDR] [-actor NAME]`: it asks a running node to
// forgive an identity (POST /admin/forgive, with the bearer token in
// $EDGE_ADMIN_TOKEN): without -rule, on every rule keyed on it
// ("identity"), each rule whose key needs a value not given named as
// skipped; with -rule, that rule's key only, every value of its key given.
// With a Redis store, for the fleet. The reason is required and goes to
// the audit log with the actor (-actor, default $USER). It prints one line
// per rule forgiven (with its key's keyed hash) and skipped, and exits 0
// once forgiven, 1 when the node refused (nothing to forgive, a value no
// request could carry) or could not be asked, and 2 on bad flags.
func forgiveCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("forgive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "127.0.0.1:9901", "the node's admin listener HOST:PORT (or http://HOST:PORT)")
	account := fs.String("account", "", "the account, as the customer spells it")
	ip := fs.String("ip", "", "the client's address (forgives the rules keyed on it, grouped by each rule's prefixes)")
	phone := fs.String("phone", "", "the phone number")
	visitor := fs.String("visitor", "", "a visitor cookie's value (with -visitor-ip, or -ip)")
	visitorIP := fs.String("visitor-ip", "", "the address the visitor was at, without forgiving the address's own rules")
	keys := keyFlags{}
	fs.Var(keys, "key", "NAME=VALUE for any other characteristic (header:X-Api-Key=k-123); repeatable")
	rule := fs.String("rule", "", "forgive this rule's key only (every value of its key given)")
	dur := fs.String("for", "", "also exempt the identity from the rules for this long, at most 24h")
	reason := fs.String("reason", "", "why, for the audit log (required)")
	who := fs.String("actor", os.Getenv("USER"), "who, for the audit log")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: edge forgive [-account A] [-ip IP] [-phone P] [-visitor COOKIE -visitor-ip IP] [-key NAME=VALUE]... [-rule NAME] [-for 1h] -reason TEXT [-admin ADDR] [-actor NAME]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "edge forgive: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if strings.TrimSpace(*reason) == "" {
		fmt.Fprintln(stderr, "edge forgive: -reason is required (it goes to the audit log)")
		return 2
	}
	for name, v := range map[string]string{"account": *account, "ip": *ip, "phone": *phone, "visitor": *visitor, "visitor_ip": *visitorIP} {
		if v != "" {
			keys[name] = v
		}
	}
	if len(keys) == 0 {
		fmt.Fprintln(stderr, "edge forgive: name the identity: -account, -ip, -phone, -visitor or -key NAME=VALUE")
		return 2
	}
	body := map[string]any{"reason": *reason}
	if *dur != "" {
		body["for"] = *dur
	}
	if *rule != "" {
		body["rule"], body["key"] = *rule, keys
	} else {
		body["identity"] = keys
	}
	b, _ := json.Marshal(body) // cannot fail
	var ans struct {
		Rule     string `json:"rule"`
		Forgiven []struct {
			Rule string `json:"rule"`
			Key  string `json:"key"`
		} `json:"forgiven"`
		Skipped []struct {
			Rule    string   `json:"rule"`
			Missing []string `json:"missing"`
		} `json:"skipped"`
		ExemptUntil string `json:"exempt_until"`
		Scope       string `json:"scope"`
		Error       string `json:"error"`
	}
	if _, code, ok := adminCall("edge forgive", *admin, "/admin/forgive", b, *who, forgiveTimeout, &ans, func() string { return ans.Error }, stderr); !ok {
		return code
	}
	if ans.Rule != "" { // one rule
		fmt.Fprintf(stdout, "forgiven: %s\n", ans.Rule)
	}
	for _, f := range ans.Forgiven {
		fmt.Fprintf(stdout, "forgiven: %s (key %s)\n", f.Rule, f.Key)
	}
	for _, s := range ans.Skipped {
		fmt.Fprintf(stdout, "skipped: %s needs %s too\n", s.Rule, strings.Join(s.Missing, " and "))
	}
	if ans.ExemptUntil != "" {
		fmt.Fprintf(stdout, "exempt until %s\n", ans.ExemptUntil)
	}
	switch ans.Scope {
	case "fleet":
		fmt.Fprintln(stdout, "scope: the fleet (Redis)")
	case "node":
		fmt.Fprintln(stdout, "scope: this node (memory store)")
	}
	return 0
}
