package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// explainTimeout bounds `edge explain`'s call: one decision, peek-only,
// on the node's store (milliseconds; Redis answers within its timeout).
const explainTimeout = 10 * time.Second

// headerFlags is a repeatable -header 'Name: value' flag, in order.
type headerFlags [][2]string

func (h *headerFlags) String() string { return fmt.Sprint(*h) }

func (h *headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	*h = append(*h, [2]string{strings.TrimSpace(name), strings.TrimSpace(value)})
	return nil
}

// explainAnswer is POST /admin/explain's answer, as the CLI prints it.
type explainAnswer struct {
	Verdict    string `json:"verdict"`
	Status     int    `json:"status"`
	Reason     string `json:"reason"`
	Refusing   string `json:"refusing"`
	RetryAfter string `json:"retry_after"`
	StoreError string `json:"store_error"`
	Matches    []struct {
		Rule       string `json:"rule"`
		Outcome    string `json:"outcome"`
		Key        string `json:"key"`
		Remaining  *int64 `json:"remaining"`
		RetryAfter string `json:"retry_after"`
		DryRun     bool   `json:"dry_run"`
		Known      bool   `json:"known"`
		Value      int    `json:"value"`
	} `json:"matches"`
	BotScore   *int     `json:"bot_score"`
	BotReasons []string `json:"bot_reasons"`
	Error      string   `json:"error"`
}

// explainCmd is `edge explain [-admin ADDR] [-method M] [-path P] [-host H]
// -from IP [-header 'K: V']... [-json '{...}' | -body B -content-type T]
// [-raw]`: it asks a running node what it would decide for the described
// request (POST /admin/explain, with the bearer token in
// $EDGE_ADMIN_TOKEN), which consumes nothing, and prints the verdict, the
// bot score and one line per matching rule (its outcome, what its counter
// has left, its retry time, its counter key's hash); -raw prints the
// node's JSON instead. -from is the socket peer: behind a trusted proxy,
// give the proxy's address and the forwarding header as a -header. It
// exits 0 once answered (whatever the verdict), 1 when the node could not
// be asked or refused the description, and 2 on bad flags.
func explainCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", defaultAdmin(), "the node's admin listener HOST:PORT (or http://HOST:PORT; default $EDGE_ADMIN, else "+defaultAdminListen+")")
	method := fs.String("method", "GET", "the request method")
	path := fs.String("path", "/", "the request target: a path with an optional query, or an absolute URL")
	host := fs.String("host", "", "the Host header (default: the upstream's address)")
	from := fs.String("from", "", "the client's (socket peer's) IP address (required)")
	jsonBody := fs.String("json", "", "a JSON body, sent as application/json")
	body := fs.String("body", "", "a raw body (with -content-type)")
	ctype := fs.String("content-type", "", "the body's Content-Type")
	rawOut := fs.Bool("raw", false, "print the node's JSON answer")
	var headers headerFlags
	fs.Var(&headers, "header", "a header line 'Name: value', repeatable, sent in the order given")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "edge explain: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *from == "" {
		fmt.Fprintln(stderr, "edge explain: -from IP is required")
		return 2
	}
	if *jsonBody != "" && !json.Valid([]byte(*jsonBody)) {
		fmt.Fprintln(stderr, "edge explain: -json is not valid JSON")
		return 2
	}
	req, err := explainBody(*method, *path, *host, *from, headers, *jsonBody, *body, *ctype)
	if err != nil {
		fmt.Fprintln(stderr, "edge explain:", err)
		return 2
	}
	var ans explainAnswer
	reply, code, ok := adminCall("edge explain", *admin, "/admin/explain", req, "", explainTimeout, &ans, func() string { return ans.Error }, stderr)
	switch {
	case !ok:
		return code
	case *rawOut:
		_, _ = stdout.Write(reply.Raw)
		return 0
	}
	printExplain(stdout, &ans)
	return 0
}

// explainBody renders the flags as POST /admin/explain's JSON, headers as
// an object in the order given (encoding/json's maps would sort them, and
// the bot score reads the order).
func explainBody(method, path, host, from string, headers headerFlags, jsonBody, body, ctype string) ([]byte, error) {
	var b bytes.Buffer
	str := func(s string) { v, _ := json.Marshal(s); b.Write(v) }
	b.WriteString(`{"method": `)
	str(method)
	b.WriteString(`, "path": `)
	str(path)
	b.WriteString(`, "from": `)
	str(from)
	if host != "" {
		b.WriteString(`, "host": `)
		str(host)
	}
	if len(headers) > 0 {
		b.WriteString(`, "headers": {`)
		for i, h := range headers {
			if i > 0 {
				b.WriteString(", ")
			}
			str(h[0])
			b.WriteString(": ")
			str(h[1])
		}
		b.WriteString("}")
	}
	switch {
	case jsonBody != "" && body != "":
		return nil, fmt.Errorf("give -json or -body, not both")
	case jsonBody != "":
		b.WriteString(`, "json": `)
		b.WriteString(jsonBody)
	case body != "":
		b.WriteString(`, "body": `)
		str(body)
	}
	if ctype != "" {
		b.WriteString(`, "content_type": `)
		str(ctype)
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

// printExplain writes the answer for a person: the verdict line, the bot
// score, and a table of the matching rules.
func printExplain(w io.Writer, a *explainAnswer) {
	fmt.Fprintf(w, "verdict: %s", a.Verdict)
	if a.Status != 0 {
		fmt.Fprintf(w, " (%d)", a.Status)
	}
	if a.Refusing != "" {
		fmt.Fprintf(w, ", refused by %s", a.Refusing)
	}
	if a.RetryAfter != "" {
		fmt.Fprintf(w, ", retry after %s", a.RetryAfter)
	}
	fmt.Fprintln(w)
	if a.Reason != "" {
		fmt.Fprintln(w, "reason:", a.Reason)
	}
	if a.StoreError != "" {
		fmt.Fprintln(w, "store error:", a.StoreError)
	}
	if a.BotScore != nil {
		fmt.Fprintf(w, "bot score: %d", *a.BotScore)
		if len(a.BotReasons) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(a.BotReasons, ", "))
		}
		fmt.Fprintln(w)
	}
	if len(a.Matches) == 0 {
		fmt.Fprintln(w, "no rule matches")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tOUTCOME\tREMAINING\tRETRY AFTER\tKEY")
	for _, m := range a.Matches {
		outcome := m.Outcome
		if m.DryRun {
			outcome += " (dry run)"
		}
		if m.Known {
			outcome += " (known visitor)"
		}
		if m.Value > 0 {
			outcome += fmt.Sprintf(" (value %d)", m.Value+1) // another value of its identity
		}
		remaining := "-"
		if m.Remaining != nil {
			remaining = fmt.Sprint(*m.Remaining)
		}
		retry, key := m.RetryAfter, m.Key
		if retry == "" {
			retry = "-"
		}
		if key == "" {
			key = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Rule, outcome, remaining, retry, key)
	}
	_ = tw.Flush()
}
