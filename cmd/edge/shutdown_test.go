package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeLogsItsShutdown: `edge serve` in its own process, stopped by
// SIGTERM or SIGINT, logs why (the signal, by its name), that it drains,
// and that it is done with exit code 0, in that order and once each,
// after it listened, and exits 0.
func TestServeLogsItsShutdown(t *testing.T) {
	for _, tt := range []struct {
		sig  syscall.Signal
		name string
	}{
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGINT, "SIGINT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			listen, admin := freeAddr(t), freeAddr(t)
			path := filepath.Join(t.TempDir(), "policies.hcl")
			s := strings.Replace(reloadPolicy(2, ""), `"127.0.0.1:18080"`, `"`+listen+`"`, 1)
			s = strings.Replace(s, `"127.0.0.1:19901"`, `"`+admin+`"`, 1)
			if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			p := startEdge(t, "-config", path)
			waitFor(t, "the node's /healthz", func() bool {
				resp, err := http.Get("http://" + admin + "/healthz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == 200
			})
			if err := p.cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			<-p.exited
			if p.err != nil {
				t.Fatalf("edge serve after %s: %v\n%s", tt.name, p.err, p.logs.String())
			}

			var msgs []string
			lines := map[string]map[string]any{}
			for line := range strings.SplitSeq(strings.TrimSpace(p.logs.String()), "\n") {
				var e map[string]any
				if json.Unmarshal([]byte(line), &e) != nil {
					continue // not a log line (the test binary's own output)
				}
				msg, _ := e["msg"].(string)
				if msg == "edge listening" || strings.HasPrefix(msg, "shutdown: ") {
					msgs = append(msgs, msg)
					lines[msg] = e
				}
			}
			want := []string{"edge listening", "shutdown: signal received", "shutdown: draining", "shutdown: done"}
			if strings.Join(msgs, "|") != strings.Join(want, "|") {
				t.Fatalf("log lines: got %q, want %q\n%s", msgs, want, p.logs.String())
			}
			if e := lines["shutdown: signal received"]; e["signal"] != tt.name || e["level"] != "INFO" || e["pid"] != float64(p.cmd.Process.Pid) {
				t.Errorf("signal line: got %v, want signal %s and the node's pid %d at INFO", e, tt.name, p.cmd.Process.Pid)
			}
			if e := lines["shutdown: draining"]; e["reason"] != "signal" || e["handing_over"] != false {
				t.Errorf("draining line: got %v, want reason signal, not handing over", e)
			}
			if e := lines["shutdown: done"]; e["reason"] != "signal" || e["exit_code"] != float64(0) || e["drain_ms"] == nil {
				t.Errorf("done line: got %v, want reason signal, exit code 0 and the drain's time", e)
			}
		})
	}
}
