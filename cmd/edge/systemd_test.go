//go:build linux

package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// systemdAnalyze is systemd-analyze's path; without it the test skips, or
// fails under EDGE_REQUIRE_STACKS=1 (.ci/run, where Debian's systemd
// package has it).
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("EDGE_REQUIRE_STACKS") == "1" {
			t.Fatal("systemd-analyze is not installed (EDGE_REQUIRE_STACKS=1: .ci/run installs Debian's systemd)")
		}
		t.Skip("systemd-analyze is not installed")
	}
	return p
}

// readUnit reads deploy/edge.service and its [Service] settings, each
// key's values in order (a key may be given more than once).
func readUnit(t *testing.T) (string, map[string][]string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "deploy", "edge.service"))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("edge.service: %q is not KEY=VALUE", line)
			}
			settings[k] = append(settings[k], v)
		}
	}
	return string(src), settings
}

// verifyUnit runs systemd-analyze verify on the unit file at path and
// returns its exit error and the lines of its output that name the unit
// (verify also warns about other units of the system, and exits 0 on an
// unknown key or a value it cannot parse: those lines are the failure).
func verifyUnit(t *testing.T, sa, path string) (error, []string) {
	t.Helper()
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	var about []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, filepath.Base(path)) {
			about = append(about, l)
		}
	}
	return err, about
}

// TestSystemdUnitVerifies: deploy/edge.service says what docs/deploying.md
// promises (a dynamic user, no new privileges, a read-only system, only
// CAP_NET_BIND_SERVICE, SIGHUP on reload), and systemd-analyze verify
// accepts it without a warning, with its ExecStart pointing at edge built
// as the image builds it (verify checks that the binary exists). A copy
// with an unknown key and one whose binary is missing fail the same
// check, so it can fail.
func TestSystemdUnitVerifies(t *testing.T) {
	src, set := readUnit(t)
	for k, want := range map[string]string{
		"DynamicUser":            "yes",
		"NoNewPrivileges":        "yes",
		"ProtectSystem":          "strict",
		"ProtectHome":            "yes",
		"PrivateTmp":             "yes",
		"AmbientCapabilities":    "CAP_NET_BIND_SERVICE",
		"CapabilityBoundingSet":  "CAP_NET_BIND_SERVICE",
		"ConfigurationDirectory": "edge",
		"Restart":                "on-failure",
		"ExecReload":             "/bin/kill -HUP $MAINPID",
		"ExecStart":              "/usr/local/bin/edge serve -config /etc/edge/policies.hcl",
	} {
		if got := set[k]; len(got) != 1 || got[0] != want {
			t.Errorf("edge.service: %s=%q, want %s=%s", k, got, k, want)
		}
	}
	if len(set["LimitNOFILE"]) != 1 || len(set["EnvironmentFile"]) != 1 {
		t.Errorf("edge.service: LimitNOFILE %q, EnvironmentFile %q: want one of each", set["LimitNOFILE"], set["EnvironmentFile"])
	}
	sa := systemdAnalyze(t)
	bin := imageBinary(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name, "edge.service")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const execStart = "ExecStart=/usr/local/bin/edge "
	if strings.Count(src, execStart) != 1 {
		t.Fatalf("edge.service has %q %d times, want once", execStart, strings.Count(src, execStart))
	}
	unit := strings.Replace(src, execStart, "ExecStart="+bin+" ", 1)

	if err, about := verifyUnit(t, sa, write("ok", unit)); err != nil || len(about) > 0 {
		t.Errorf("systemd-analyze verify deploy/edge.service: %v\n%s", err, strings.Join(about, "\n"))
	}
	// The check's controls.
	bad := strings.Replace(unit, "[Service]\n", "[Service]\nNoSuchSetting=yes\n", 1)
	if _, about := verifyUnit(t, sa, write("unknown-key", bad)); len(about) == 0 {
		t.Error("systemd-analyze verify says nothing about an unknown key: the check cannot fail")
	}
	missing := strings.Replace(unit, "ExecStart="+bin, "ExecStart="+filepath.Join(dir, "no-such-edge"), 1)
	if err, _ := verifyUnit(t, sa, write("missing-binary", missing)); err == nil {
		t.Error("systemd-analyze verify passes a unit whose binary is missing: the check cannot fail")
	}
}

// TestSystemdUnitLifecycle runs the unit's ExecStart as systemd would,
// with $NOTIFY_SOCKET, on a copy of the shipped policy moved to free ports:
// with Type=notify the node must say READY=1 once it serves (or systemd
// kills it when TimeoutStartSec runs out), RELOADING=1 and then READY=1
// around the reload that ExecReload's SIGHUP asks for, and STOPPING=1 on
// SIGTERM (systemctl stop), after which it exits 0. With Type=exec it
// must serve and stop the same way.
func TestSystemdUnitLifecycle(t *testing.T) {
	_, set := readUnit(t)
	typ := set["Type"]
	if len(typ) != 1 || (typ[0] != "notify" && typ[0] != "exec") {
		t.Fatalf("edge.service: Type=%q, want notify or exec", typ)
	}
	argv := strings.Fields(set["ExecStart"][0])
	ci := slices.Index(argv, "-config") + 1
	if ci == 0 || strings.ContainsAny(set["ExecStart"][0], `"'$%`) {
		t.Fatalf("ExecStart=%s: want a plain command line with -config", set["ExecStart"][0])
	}
	dir := t.TempDir()
	argv[0] = imageBinary(t)

	src, err := os.ReadFile(filepath.Join(root, "policies.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	admin := freeAddr(t)
	policy := string(src)
	for old, new := range map[string]string{
		`listen = "127.0.0.1:8080"`:       `listen = "` + freeAddr(t) + `"`,
		`admin_listen = "127.0.0.1:9901"`: `admin_listen = "` + admin + `"`,
	} {
		if strings.Count(policy, old) != 1 {
			t.Fatalf("policies.hcl has %q %d times, want once (to move it)", old, strings.Count(policy, old))
		}
		policy = strings.Replace(policy, old, new, 1)
	}
	argv[ci] = filepath.Join(dir, "policies.hcl")
	if err := os.WriteFile(argv[ci], []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(dir, "notify")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	notes := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := nc.Read(buf)
			if err != nil {
				close(notes)
				return
			}
			notes <- string(buf[:n])
		}
	}()
	// next waits for a notification with the line want, dropping those
	// before it; a 30 s hang guard.
	next := func(want string) {
		t.Helper()
		guard := time.After(30 * time.Second)
		for {
			select {
			case n, ok := <-notes:
				if !ok {
					t.Fatalf("the notify socket closed before %s", want)
				}
				if slices.Contains(strings.Split(n, "\n"), want) {
					return
				}
			case <-guard:
				t.Fatalf("no %s notification within 30s", want)
			}
		}
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "NOTIFY_SOCKET=" + sock}
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()
	if typ[0] == "notify" {
		next("READY=1")
	}
	waitFor(t, "a ready node", func() bool { return run([]string{"health", "-admin", admin}, &syncBuffer{}, &syncBuffer{}) == 0 })

	// ExecReload, with $MAINPID as systemd sets it.
	reload := strings.Fields(strings.ReplaceAll(set["ExecReload"][0], "$MAINPID", strconv.Itoa(cmd.Process.Pid)))
	if out, err := exec.Command(reload[0], reload[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("ExecReload %q: %v\n%s", reload, err, out)
	}
	if typ[0] == "notify" {
		next("RELOADING=1")
		next("READY=1")
	}
	waitFor(t, "the reload in the log", func() bool {
		return strings.Contains(logs.String(), `"msg":"policy reloaded","trigger":"signal"`)
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if typ[0] == "notify" {
		next("STOPPING=1")
	}
	select {
	case <-exited:
		err := waitErr
		if err != nil {
			t.Errorf("ExecStart's node after SIGTERM: %v, want exit 0\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatalf("ExecStart's node has not stopped 30s after SIGTERM\n%s", logs.String())
	}
}
