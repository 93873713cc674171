package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// defaultAdmin is the admin listener the admin commands (reload, dry-run,
// explain, health) call without -admin: $EDGE_ADMIN when set, as an
// operator who runs a node elsewhere sets it once per shell, else the
// policy language's default admin_listen.
func defaultAdmin() string {
	if a := os.Getenv("EDGE_ADMIN"); a != "" {
		return a
	}
	return defaultAdminListen
}

// adminReply is an admin API answer as the CLI commands read it.
type adminReply struct {
	// URL is the endpoint called; Status its status line, Code its code.
	URL    string
	Status string
	Code   int
	// Raw is the body as received (at most 1 MiB).
	Raw []byte
}

// adminPost POSTs body as JSON to path on the admin listener admin
// ("HOST:PORT" or a URL), with $EDGE_ADMIN_TOKEN as the bearer token and
// actor (when not empty) as X-Edge-Actor, and decodes the JSON answer into
// ans. On failure it returns the exit status to use: 2 for an address
// that makes no request, 1 for a node that cannot be reached or whose
// answer is not JSON (the error then says so, naming the endpoint).
func adminPost(admin, path string, body []byte, actor string, timeout time.Duration, ans any) (adminReply, int, error) {
	base := admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return adminReply{}, 2, err
	}
	req.Header.Set("Content-Type", "application/json")
	if tok := os.Getenv("EDGE_ADMIN_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if a := strings.TrimSpace(actor); a != "" {
		req.Header.Set("X-Edge-Actor", a)
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return adminReply{}, 1, err
	}
	defer resp.Body.Close()
	r := adminReply{URL: req.URL.String(), Status: resp.Status, Code: resp.StatusCode}
	r.Raw, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(r.Raw, ans)
	}
	if err != nil {
		return r, 1, fmt.Errorf("%s answered %s: %v", r.URL, r.Status, err)
	}
	return r, 0, nil
}

// adminCall is adminPost for a command (cmd, "edge forgive") whose
// endpoint answers 200 on success and {"error": …} otherwise: it prints
// either failure to stderr, as "CMD: …", and reports whether the call
// succeeded, with the exit status to use when it did not. errOf reads the
// answer's error once ans is decoded.
func adminCall(cmd, admin, path string, body []byte, actor string, timeout time.Duration, ans any, errOf func() string, stderr io.Writer) (adminReply, int, bool) {
	reply, code, err := adminPost(admin, path, body, actor, timeout, ans)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return reply, code, false
	case reply.Code != http.StatusOK:
		fmt.Fprintf(stderr, "%s: %s answered %s: %s\n", cmd, reply.URL, reply.Status, errOf())
		return reply, 1, false
	}
	return reply, 0, true
}
