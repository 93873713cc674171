package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The docs' examples, run (docs/README.md, "Examples that run"): every
// ```console block of README.md and docs/*.md is a transcript, `$ CMD`
// lines (continued by `> ` lines) each followed by the output it prints.
// TestDocExamples runs each file's blocks, in order, in one bash per block
// from the repository's root, against a fresh `edge -demo` on free
// loopback ports, and fails on any line that differs.

// The addresses the docs name, and the demo's origin: a command's are
// rewritten to the demo's free ports, and an output's back.
const (
	docListen = "127.0.0.1:8080"
	docAdmin  = "127.0.0.1:9901"
	docOrigin = "127.0.0.1:9000"
	// docToken is $EDGE_ADMIN_TOKEN of the demo and of the examples' shell.
	docToken = "docs-examples-token"
)

// docStep is one command of a transcript and the output it shows.
type docStep struct {
	line int    // of the $ line, 1-based
	cmd  string // without "$ ", continuation lines joined with "\n"
	want []string
}

// docBlock is one ```console block.
type docBlock struct {
	file  string
	line  int // of the opening fence
	steps []docStep
}

// parseConsoleBlocks returns the ```console blocks of src (named file), or
// an error for a line the convention does not allow: text in a block that
// is neither a command, its continuation, its output, a blank line nor a
// # comment before a command.
func parseConsoleBlocks(file, src string) ([]docBlock, error) {
	var blocks []docBlock
	var cur *docBlock
	inOutput := false
	for i, line := range strings.Split(src, "\n") {
		n := i + 1
		switch {
		case cur == nil:
			if strings.TrimSpace(line) == "```console" {
				blocks = append(blocks, docBlock{file: file, line: n})
				cur, inOutput = &blocks[len(blocks)-1], false
			}
		case strings.TrimSpace(line) == "```":
			cur = nil
		case strings.HasPrefix(line, "$ "):
			cur.steps = append(cur.steps, docStep{line: n, cmd: line[2:]})
			inOutput = true
		case (strings.HasPrefix(line, "> ") || line == ">") && inOutput && len(cur.steps) > 0 && len(cur.steps[len(cur.steps)-1].want) == 0:
			s := &cur.steps[len(cur.steps)-1]
			s.cmd += "\n" + strings.TrimPrefix(strings.TrimPrefix(line, ">"), " ")
		case strings.TrimSpace(line) == "":
			inOutput = false
		case inOutput:
			s := &cur.steps[len(cur.steps)-1]
			s.want = append(s.want, line)
		case strings.HasPrefix(line, "#"):
			// A comment before a command.
		default:
			return nil, fmt.Errorf("%s:%d: %q in a console block is neither a command ($ ), its output, nor a # comment after a blank line", file, n, line)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: console block not closed", file, cur.line)
	}
	return blocks, nil
}

// outputMatches reports whether got matches the transcript's want lines:
// equal after trailing spaces (and a CR) are trimmed, where … in a want line matches
// any text within the line, and a want line of only … matches any number
// of lines, none included.
func outputMatches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "…" {
		for k := 0; k <= len(got); k++ {
			if outputMatches(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && lineMatches(want[0], got[0]) && outputMatches(want[1:], got[1:])
}

func lineMatches(want, got string) bool {
	// curl -i prints the answer's CRLF line ends.
	want, got = strings.TrimRight(want, " \t"), strings.TrimRight(got, " \t\r")
	if !strings.Contains(want, "…") {
		return want == got
	}
	parts := strings.Split(want, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

// TestOutputMatches: the placeholders match what they say and no more; a
// wrong expected line fails.
func TestOutputMatches(t *testing.T) {
	tests := []struct {
		want, got string
		ok        bool
	}{
		{"401 401 429", "401 401 429", true},
		{"401 401 429", "400 400 429", false},
		{"401 401 429", "401 401 429   ", true},
		{"until …", "until 2026-12-03T15:07:36Z", true},
		{"verdict: deny (429), refused by …, retry after …", "verdict: deny (429), refused by login-per-visitor, retry after 11.9s", true},
		{"verdict: deny (429), refused by …", "verdict: allow", false},
		{"a\n…\nz", "a\nz", true},
		{"a\n…\nz", "a\nb\nc\nz", true},
		{"a\n…\nz", "a\nb\nc", false},
		{"a", "a\nb", false},
	}
	for _, tt := range tests {
		if got := outputMatches(strings.Split(tt.want, "\n"), strings.Split(tt.got, "\n")); got != tt.ok {
			t.Errorf("want %q, got %q: matches %v, want %v", tt.want, tt.got, got, tt.ok)
		}
	}
}

// docFiles are the files whose console blocks run: README.md and
// docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// TestDocExamples runs every console block of README.md and docs/*.md
// against the demo and compares each command's output (stdout and stderr)
// with the transcript's.
func TestDocExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("EDGE_REQUIRE_STACKS") != "" {
				t.Fatalf("%s is not installed (EDGE_REQUIRE_STACKS is set)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	var all []docBlock
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		blocks, err := parseConsoleBlocks(rel, string(src))
		if err != nil {
			t.Error(err)
		}
		all = append(all, blocks...)
	}
	if len(all) == 0 {
		t.Fatal("no console blocks in README.md and docs/*.md")
	}
	bin := buildEdge(t)
	for _, f := range docFiles(t) {
		rel, _ := filepath.Rel(root, f)
		var blocks []docBlock
		for _, b := range all {
			if b.file == rel {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		t.Run(rel, func(t *testing.T) {
			d := startDemo(t, bin)
			for _, b := range blocks {
				runBlock(t, d, bin, b)
			}
		})
	}
}

// buildEdge builds the edge binary of this tree into a temporary
// directory and returns that directory: on PATH, `edge` is the binary.
func buildEdge(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the binary with")
	}
	cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, "edge"), "./cmd/edge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/edge: %v\n%s", err, out)
	}
	return dir
}

// demoNode is a running `edge -demo`.
type demoNode struct{ listen, admin, origin string }

// startDemo starts `edge -demo` from the repository's root (the shipped
// policies.hcl, the memory store, the demo origin) on free loopback ports,
// and returns once it is ready; it is stopped when the test ends.
func startDemo(t *testing.T, bin string) demoNode {
	t.Helper()
	d := demoNode{listen: freeAddr(t), admin: freeAddr(t), origin: freeAddr(t)}
	cmd := exec.Command(filepath.Join(bin, "edge"), "-demo", "-listen", d.listen, "-admin", d.admin, "-upstream", "http://"+d.origin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "EDGE_ADMIN_TOKEN="+docToken)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	waitFor(t, "the demo to be ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("edge -demo exited:\n%s", logs.String())
		default:
		}
		resp, err := http.Get("http://" + d.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return d
}

// stepMarker separates the steps' outputs in a block's combined output.
const stepMarker = "@@edge-docs-step@@"

// runBlock runs b's commands in one bash, from the repository's root,
// with the docs' addresses rewritten to d's, and compares each command's
// output with its transcript.
func runBlock(t *testing.T, d demoNode, bin string, b docBlock) {
	t.Helper()
	toDemo := strings.NewReplacer(docListen, d.listen, docAdmin, d.admin, docOrigin, d.origin)
	fromDemo := strings.NewReplacer(d.listen, docListen, d.admin, docAdmin, d.origin, docOrigin)
	var script strings.Builder
	// `go run ./cmd/edge` is the binary built from this tree, as `edge` is.
	script.WriteString("exec 2>&1\ngo() { if [ \"$1\" = run ] && [ \"$2\" = ./cmd/edge ]; then shift 2; edge \"$@\"; else command go \"$@\"; fi; }\n")
	for _, s := range b.steps {
		fmt.Fprintf(&script, "printf '\\n%s\\n'\n%s\n", stepMarker, toDemo.Replace(s.cmd))
	}
	fmt.Fprintf(&script, "printf '\\n%s\\n'\n", stepMarker)
	path := filepath.Join(t.TempDir(), "block.sh")
	if err := os.WriteFile(path, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// A hang guard, not a bound on correctness.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", path)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"EDGE_ADMIN="+d.admin, "EDGE_ADMIN_TOKEN="+docToken, "LC_ALL=C.UTF-8")
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("%s:%d: the block did not finish within 60s", b.file, b.line)
	}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%s:%d: bash: %v", b.file, b.line, err)
		}
	}
	parts := strings.Split(fromDemo.Replace(string(out)), "\n"+stepMarker+"\n")
	if len(parts) != len(b.steps)+2 {
		t.Fatalf("%s:%d: the block's output has %d parts, want %d (a command exited the shell?):\n%s", b.file, b.line, len(parts), len(b.steps)+2, out)
	}
	for i, s := range b.steps {
		got := strings.Split(strings.TrimRight(parts[i+1], "\n"), "\n")
		if len(got) == 1 && got[0] == "" {
			got = nil
		}
		if !outputMatches(s.want, got) {
			t.Errorf("%s:%d: $ %s\noutput:\n%s\nthe doc shows:\n%s", b.file, s.line, s.cmd, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
	}
}
