//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/node"
)

// No container daemon runs here, so these tests take ./Dockerfile apart and
// do what the image would: build the binary as the build stage's RUN line
// does, lay the final stage's COPY lines out under a temporary root, and
// run its ENTRYPOINT + CMD and its HEALTHCHECK, with the paths moved under
// that root (docs/deploying.md, "Container image and systemd unit").

// dockerInstr is one Dockerfile instruction, continuation lines joined.
type dockerInstr struct {
	Cmd  string // upper case: FROM, RUN, COPY…
	Args string
	Line int
}

// dockerStage is one FROM and the instructions after it.
type dockerStage struct {
	Image, Name string
	Instrs      []dockerInstr
}

// parseDockerfile reads path into its stages: comments and blank lines
// dropped, lines ending in a backslash joined (comment lines inside a
// continued instruction skipped, as BuildKit does).
func parseDockerfile(t *testing.T, path string) []dockerStage {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var instrs []dockerInstr
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		instrs = append(instrs, dockerInstr{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("%s: the last instruction ends in a backslash", path)
	}
	var stages []dockerStage
	for _, in := range instrs {
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := dockerStage{Image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.Cmd != "ARG" {
				t.Fatalf("%s:%d: %s before the first FROM", path, in.Line, in.Cmd)
			}
			continue
		}
		stages[len(stages)-1].Instrs = append(stages[len(stages)-1].Instrs, in)
	}
	if len(stages) < 2 {
		t.Fatalf("%s: %d stages, want a build stage and a final stage", path, len(stages))
	}
	return stages
}

// shellWords splits a RUN line as sh would for the simple commands these
// tests replay: words, "double" and 'single' quotes. Anything else sh
// would treat specially (&&, ;, |, $, backquotes) is an error: the test
// cannot replay it.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			q := s[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(q, "$`\\") {
				return nil, fmt.Errorf("expansion inside %q", q)
			}
			w.WriteString(q)
			inWord = true
			i += j + 1
		case strings.IndexByte("&;|<>$`\\(){}*?", c) >= 0:
			return nil, fmt.Errorf("shell syntax %q", c)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// imageBuild is the build stage's `go build`, as the Dockerfile writes it.
type imageBuild struct {
	Env    []string // NAME=VALUE assignments before go build, and the stage's ENV and ARG defaults
	Args   []string // go build's arguments, -o and its value left out
	Output string   // -o: the binary's path in the build stage
	Line   int
}

// imageSpec is what the final stage puts in the image and runs.
type imageSpec struct {
	Base        string
	User        string      // the last USER, "" if none
	Copies      [][3]string // from ("" for the build context), source, destination
	Expose      []string
	Healthcheck []string // HEALTHCHECK's CMD, exec form
	HealthOpts  map[string]string
	Entrypoint  []string
	Cmd         []string
}

// execForm decodes an exec-form (JSON array) instruction argument; shell
// form needs /bin/sh, which a distroless or scratch image does not have.
func execForm(t *testing.T, in dockerInstr, args string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("Dockerfile:%d: %s %s is not in exec form (a JSON array of strings): the final image has no shell", in.Line, in.Cmd, args)
	}
	return argv
}

// readDockerfile parses ../../Dockerfile into its go build and its final
// stage.
func readDockerfile(t *testing.T) (imageBuild, imageSpec, []dockerStage) {
	t.Helper()
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	final := stages[len(stages)-1]
	var b imageBuild
	var buildStage *dockerStage
	for i := range stages[:len(stages)-1] {
		for _, in := range stages[i].Instrs {
			switch in.Cmd {
			case "ENV", "ARG":
				for _, kv := range strings.Fields(in.Args) {
					if strings.Contains(kv, "=") { // an ARG without a default is unset
						b.Env = append(b.Env, strings.Trim(kv, `"`))
					}
				}
			case "RUN":
				rest := in.Args
				for strings.HasPrefix(rest, "--") { // RUN's own flags (--mount=…)
					_, rest, _ = strings.Cut(rest, " ")
					rest = strings.TrimSpace(rest)
				}
				if !strings.Contains(rest, "go build") {
					continue
				}
				if buildStage != nil {
					t.Fatalf("Dockerfile:%d: a second go build", in.Line)
				}
				buildStage = &stages[i]
				words, err := shellWords(rest)
				if err != nil {
					t.Fatalf("Dockerfile:%d: the go build line is not one simple command (%v): this test replays it word for word", in.Line, err)
				}
				for len(words) > 0 && strings.Contains(words[0], "=") {
					b.Env = append(b.Env, words[0])
					words = words[1:]
				}
				if len(words) < 2 || words[0] != "go" || words[1] != "build" {
					t.Fatalf("Dockerfile:%d: want [ENV=VALUE…] go build …, got %q", in.Line, rest)
				}
				for j := 2; j < len(words); j++ {
					if words[j] == "-o" && j+1 < len(words) {
						b.Output = words[j+1]
						j++
						continue
					}
					b.Args = append(b.Args, words[j])
				}
				b.Line = in.Line
			}
		}
		if buildStage == &stages[i] {
			break
		}
	}
	if buildStage == nil || b.Output == "" {
		t.Fatal("Dockerfile: no build stage with a `go build -o OUT` RUN line")
	}
	var s imageSpec
	s.Base = final.Image
	for _, in := range final.Instrs {
		switch in.Cmd {
		case "USER":
			s.User = in.Args
		case "COPY":
			f := strings.Fields(in.Args)
			from := ""
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--from="); ok {
					from = v
				}
				f = f[1:]
			}
			if len(f) != 2 {
				t.Fatalf("Dockerfile:%d: COPY with %d paths; this test knows COPY SRC DST", in.Line, len(f))
			}
			s.Copies = append(s.Copies, [3]string{from, f[0], f[1]})
		case "EXPOSE":
			s.Expose = append(s.Expose, strings.Fields(in.Args)...)
		case "HEALTHCHECK":
			s.HealthOpts = map[string]string{}
			rest := in.Args
			for strings.HasPrefix(rest, "--") {
				var opt string
				opt, rest, _ = strings.Cut(rest, " ")
				k, v, _ := strings.Cut(strings.TrimPrefix(opt, "--"), "=")
				s.HealthOpts[k] = v
				rest = strings.TrimSpace(rest)
			}
			c, ok := strings.CutPrefix(rest, "CMD ")
			if !ok {
				t.Fatalf("Dockerfile:%d: HEALTHCHECK without CMD", in.Line)
			}
			s.Healthcheck = execForm(t, in, strings.TrimSpace(c))
		case "ENTRYPOINT":
			s.Entrypoint = execForm(t, in, in.Args)
		case "CMD":
			s.Cmd = execForm(t, in, in.Args)
		}
	}
	return b, s, stages
}

// buildLikeImage builds ./cmd/edge as the Dockerfile's build stage does
// (its environment, its flags), into dir, and returns the binary's path.
// The compile is the go build cache's after the first test that asks.
func buildLikeImage(t *testing.T, b imageBuild, dir string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.FromSlash(b.Output))
	args := append([]string{"build", "-o", out}, b.Args...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root // WORKDIR /src after COPY . .: the context's root
	cmd.Env = append(os.Environ(), b.Env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s (Dockerfile:%d, env %q): %v\n%s", strings.Join(args, " "), b.Line, b.Env, err, msg)
	}
	return out
}

// imageBinary is the image's edge binary, built by buildLikeImage into a
// directory of the test's.
func imageBinary(t *testing.T) string {
	t.Helper()
	b, _, _ := readDockerfile(t)
	return buildLikeImage(t, b, t.TempDir())
}

// dockerignore is .dockerignore's patterns, in Docker's semantics
// (github.com/moby/patternmatcher): matched against the slash-separated
// path from the context's root, a leading / dropped, ** any number of
// directories, a match on a directory leaving out all inside it, a
// leading ! taking a match back, the last matching pattern winning.
type dockerignore []struct {
	re     *regexp.Regexp
	negate bool
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for _, line := range strings.Split(string(src), "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		neg := strings.HasPrefix(p, "!")
		p = path.Clean(strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/"))
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch c := p[i]; {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("(/.*)?$") // a directory's match covers what is in it
		d = append(d, struct {
			re     *regexp.Regexp
			negate bool
		}{regexp.MustCompile(re.String()), neg})
	}
	return d
}

// excluded reports whether the context path rel (slash-separated) is left
// out of the build context.
func (d dockerignore) excluded(rel string) bool {
	out := false
	for _, p := range d {
		if p.re.MatchString(rel) {
			out = !p.negate
		}
	}
	return out
}

// TestDockerfile checks the Dockerfile's promises that need no run: a Go
// as new as go.mod's, a static build, a non-root final stage without a
// shell-form command, COPY sources that exist and reach the context, a
// .dockerignore that leaves out no tracked file, a HEALTHCHECK running
// `edge health` with a timeout longer than its own, and an EXPOSE that is
// the port CMD listens on.
func TestDockerfile(t *testing.T) {
	b, s, stages := readDockerfile(t)

	// The build stage's Go is at least go.mod's.
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(string(mod))
	tag := regexp.MustCompile(`^golang:(\d+)\.(\d+)`).FindStringSubmatch(stages[0].Image)
	if goLine == nil || tag == nil {
		t.Fatalf("go.mod's go line %q, build image %q: want go X.Y and golang:X.Y…", goLine, stages[0].Image)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	if atoi(tag[1])*1000+atoi(tag[2]) < atoi(goLine[1])*1000+atoi(goLine[2]) {
		t.Errorf("the build stage runs %s, older than go.mod's go %s.%s", stages[0].Image, goLine[1], goLine[2])
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile:%d: go build without CGO_ENABLED=0 (env %q): the final image has no libc", b.Line, b.Env)
	}
	for _, want := range []string{"-trimpath", "./cmd/edge"} {
		if !slices.Contains(b.Args, want) {
			t.Errorf("Dockerfile:%d: go build lacks %s (args %q)", b.Line, want, b.Args)
		}
	}

	// Non-root: a USER that is not root, or a :nonroot base and no USER.
	switch u, _, _ := strings.Cut(s.User, ":"); {
	case u == "root" || u == "0":
		t.Errorf("the final stage runs as USER %s", s.User)
	case u == "" && !strings.HasSuffix(s.Base, ":nonroot"):
		t.Errorf("the final stage (FROM %s) has no USER and no :nonroot base: it runs as root", s.Base)
	}

	// COPY sources: the build's output, or context files that exist and
	// that .dockerignore does not leave out.
	ign := readDockerignore(t)
	names := map[string]bool{}
	for _, st := range stages[:len(stages)-1] {
		names[st.Name] = true
	}
	var bin string
	for _, c := range s.Copies {
		switch {
		case c[0] != "":
			if !names[c[0]] || c[1] != b.Output {
				t.Errorf("COPY --from=%s %s: want the build stage's go build -o %s", c[0], c[1], b.Output)
			}
			bin = c[2]
		default:
			if _, err := os.Stat(filepath.Join(root, c[1])); err != nil {
				t.Errorf("COPY %s %s: %v", c[1], c[2], err)
			}
			if ign.excluded(path.Clean(c[1])) {
				t.Errorf("COPY %s: .dockerignore leaves it out of the context", c[1])
			}
		}
	}
	for _, st := range stages[:len(stages)-1] {
		for _, in := range st.Instrs {
			if in.Cmd != "COPY" || strings.Contains(in.Args, "--from") {
				continue
			}
			for _, src := range strings.Fields(in.Args)[:len(strings.Fields(in.Args))-1] {
				if src != "." && ign.excluded(path.Clean(src)) {
					t.Errorf("Dockerfile:%d: COPY %s: .dockerignore leaves it out", in.Line, src)
				}
			}
		}
	}
	if bin == "" {
		t.Fatal("the final stage copies no binary from the build stage")
	}
	// A sanity check of the matcher, then the tracked files: none left out.
	for rel, want := range map[string]bool{"edge": true, "cmd/edge/edge.test": true, "deploy/edge.env": true, "policies.hcl": false, "cmd/edge/main.go": false} {
		if got := ign.excluded(rel); got != want {
			t.Errorf(".dockerignore: excluded(%q) = %v, want %v", rel, got, want)
		}
	}
	if out, err := exec.Command("git", "-C", root, "ls-files").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if ign.excluded(f) {
				t.Errorf(".dockerignore leaves out %s, which git tracks: the image's edge version would say \"(modified)\"", f)
			}
		}
	} else {
		t.Logf("not a git checkout (%v): tracked files not checked against .dockerignore", err)
	}

	// The HEALTHCHECK and the command are the binary; the health probe's
	// own timeout is shorter than Docker's, so that edge health says why.
	for what, argv := range map[string][]string{"ENTRYPOINT": s.Entrypoint, "HEALTHCHECK": s.Healthcheck} {
		if len(argv) == 0 || argv[0] != bin {
			t.Errorf("%s %q does not run the copied binary %s", what, argv, bin)
		}
	}
	if len(s.Healthcheck) < 2 || s.Healthcheck[1] != "health" {
		t.Errorf("HEALTHCHECK %q: want edge health", s.Healthcheck)
	}
	if d, err := time.ParseDuration(s.HealthOpts["timeout"]); err != nil || d <= 2*time.Second {
		t.Errorf("HEALTHCHECK --timeout=%q: want a duration longer than edge health's 2s", s.HealthOpts["timeout"])
	}
	argv := append(slices.Clone(s.Entrypoint), s.Cmd...)
	i := slices.Index(argv, "-listen")
	if i < 0 || i+1 >= len(argv) {
		t.Fatalf("ENTRYPOINT + CMD %q: no -listen", argv)
	}
	host, port, err := net.SplitHostPort(argv[i+1])
	if err != nil || (host != "0.0.0.0" && host != "" && host != "::") {
		t.Errorf("-listen %s: a container's listener must take every address of its network namespace", argv[i+1])
	}
	if !slices.Contains(s.Expose, port) && !slices.Contains(s.Expose, port+"/tcp") {
		t.Errorf("EXPOSE %q, but the command listens on port %s", s.Expose, port)
	}
}

// imageRun is one run of the image's command: its files under Root, and
// the addresses it serves on, as the policy and the command have them (in
// a network namespace of its own) or moved to free ports (without one).
type imageRun struct {
	Root string
	// Argv and Healthcheck are the image's ENTRYPOINT + CMD and
	// HEALTHCHECK: as written when Contained, else with their paths moved
	// under Root.
	Argv, Healthcheck []string
	Public            string // HOST:PORT to send requests to
	Upstream          string // HOST:PORT where the demo origin listens
	// Contained runs the command and the probe as a container would: with
	// Root as their root directory (chroot), as 65532:65532.
	Contained bool
}

// TestImageHelperProcess runs an imageRun in the network namespace its
// parent, TestImageEntrypoint, made for it; it skips otherwise.
func TestImageHelperProcess(t *testing.T) {
	spec := os.Getenv("EDGE_IMAGE_HELPER")
	if spec == "" {
		t.Skip("run by TestImageEntrypoint")
	}
	var r imageRun
	if err := json.Unmarshal([]byte(spec), &r); err != nil {
		t.Fatal(err)
	}
	if err := loopbackUp(); err != nil {
		t.Fatalf("bringing up lo in the new network namespace: %v", err)
	}
	exerciseImage(t, r)
}

// loopbackUp sets IFF_UP on lo (a new network namespace has it down), by
// the SIOCGIFFLAGS and SIOCSIFFLAGS ioctls on an ifreq (netdevice(7)).
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: char ifr_name[16], then a union whose short ifr_flags comes first
	copy(ifr[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("SIOCGIFFLAGS: %w", e)
	}
	binary.NativeEndian.PutUint16(ifr[16:], binary.NativeEndian.Uint16(ifr[16:])|syscall.IFF_UP)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("SIOCSIFFLAGS: %w", e)
	}
	return nil
}

// TestImageEntrypoint runs what the image runs: the binary built as the
// build stage builds it, the shipped policy at /etc/edge/policies.hcl (both
// under a temporary root), ENTRYPOINT + CMD word for word, in front of the
// demo origin. It must serve the shipped policy (a sixth login a minute is
// refused), pass its HEALTHCHECK, stop with exit 0 on SIGTERM (docker
// stop), and then fail the HEALTHCHECK.
//
// As root it runs as a container does: in a network namespace of its own,
// so the command's 0.0.0.0:8080 and the policy's 127.0.0.1:9901 and
// upstream 127.0.0.1:9000 are used as written; with the temporary root as
// its root directory, so the command and the HEALTHCHECK run word for word
// and find nothing but what the COPY lines put there (no libc, no CA
// certificates, no /etc/passwd: distroless has more); and as the image's
// user 65532:65532, with files root-owned as COPY leaves them (it writes
// nothing). Without root (or namespaces) it also runs here, with the paths
// moved under the temporary root and the addresses moved to free loopback
// ports, in the policy's copy and the -listen argument.
func TestImageEntrypoint(t *testing.T) {
	b, s, _ := readDockerfile(t)
	base := t.TempDir()
	buildDir, rootfs := filepath.Join(base, "build"), filepath.Join(base, "rootfs")
	buildLikeImage(t, b, buildDir)
	for _, c := range s.Copies {
		src := filepath.Join(root, filepath.FromSlash(c[1]))
		if c[0] != "" {
			src = filepath.Join(buildDir, filepath.FromSlash(c[1]))
		}
		dst := c[2]
		if strings.HasSuffix(dst, "/") {
			dst += path.Base(c[1])
		}
		copyFile(t, src, filepath.Join(rootfs, filepath.FromSlash(dst)))
	}
	// The image's root is readable by all (the user 65532 must traverse
	// it), as an image's is.
	for d := base; d != os.TempDir() && d != filepath.Dir(d); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	inRoot := func(argv []string) []string {
		out := slices.Clone(argv)
		for i, a := range out {
			if strings.HasPrefix(a, "/") {
				if _, err := os.Stat(filepath.Join(rootfs, a)); err == nil {
					out[i] = filepath.Join(rootfs, a)
				}
			}
		}
		return out
	}
	argv := append(slices.Clone(s.Entrypoint), s.Cmd...)
	r := imageRun{Root: rootfs, Argv: inRoot(argv), Healthcheck: inRoot(s.Healthcheck)}
	li := slices.Index(argv, "-listen") + 1
	ci := slices.Index(argv, "-config") + 1
	if li == 0 || ci == 0 {
		t.Fatalf("ENTRYPOINT + CMD %q: want -config and -listen", argv)
	}
	policy := r.Argv[ci]
	p, diags := builtin.LoadFile(policy)
	if diags.HasErrors() {
		t.Fatalf("the image's policy %s: %s", argv[ci], diags.Error())
	}
	up, err := url.Parse(node.Of(p).Upstream)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(argv[li])

	t.Run("netns", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("not root: no network namespace of its own (the run on moved ports covers the command)")
		}
		r := r
		r.Public, r.Upstream, r.Contained = net.JoinHostPort("127.0.0.1", port), up.Host, true
		r.Argv, r.Healthcheck = argv, s.Healthcheck
		spec, _ := json.Marshal(r)
		cmd := exec.Command(os.Args[0], "-test.run=^TestImageHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "EDGE_IMAGE_HELPER="+string(spec))
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		var perr *os.PathError
		switch {
		case errors.As(err, &perr):
			t.Skipf("no network namespace here (%v): the run on moved ports covers the command", err)
		case err != nil:
			t.Fatalf("the image's command in its network namespace: %v\n%s", err, out)
		case !strings.Contains(string(out), "--- PASS: TestImageHelperProcess"):
			t.Fatalf("the helper process did not run:\n%s", out)
		}
	})

	// Here, on free ports: the policy's copy and the -listen argument moved.
	t.Run("moved-ports", func(t *testing.T) {
		r := r
		r.Argv = slices.Clone(r.Argv)
		src, err := os.ReadFile(policy)
		if err != nil {
			t.Fatal(err)
		}
		r.Upstream, r.Public = freeAddr(t), freeAddr(t)
		olds := map[string]string{
			strconv.Quote(node.Of(p).AdminListen): strconv.Quote(freeAddr(t)),
			strconv.Quote(node.Of(p).Upstream):    strconv.Quote("http://" + r.Upstream),
		}
		moved := string(src)
		for old, new := range olds {
			if strings.Count(moved, old) != 1 {
				t.Fatalf("the image's policy has %s %d times, want once (to move it)", old, strings.Count(moved, old))
			}
			moved = strings.Replace(moved, old, new, 1)
		}
		if err := os.WriteFile(policy, []byte(moved), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(policy, src, 0o644)
		r.Argv[li] = r.Public
		exerciseImage(t, r)
	})
}

// exerciseImage starts the demo origin on r.Upstream and r.Argv, and
// checks what TestImageEntrypoint says.
func exerciseImage(t *testing.T, r imageRun) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	oln, err := net.Listen("tcp", r.Upstream)
	if err != nil {
		t.Fatalf("the demo origin on the policy's upstream %s: %v", r.Upstream, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); _ = demo.New().Serve(ctx, oln) }()

	command := func(argv []string) *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"} // distroless's, and nothing else
		if r.Contained {
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: r.Root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		}
		return cmd
	}
	node := command(r.Argv)
	logs := &syncBuffer{}
	node.Stdout, node.Stderr = logs, logs
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = node.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			node.Process.Kill()
			<-exited
		}
	}()

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	login := func() (int, error) {
		resp, err := client.Post("http://"+r.Public+"/login", "application/json",
			strings.NewReader(`{"username":"alice","password":"letmein-demo"}`))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard: starting takes milliseconds
	first := 0
	for first == 0 {
		select {
		case <-exited:
			err := waitErr
			t.Fatalf("the image's command %q exited: %v\n%s", r.Argv, err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image's command does not serve on %s within 30s\n%s", r.Public, logs.String())
		}
		if code, err := login(); err == nil {
			first = code
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if r.Contained {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", node.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^Uid:\s+65532\s+65532\s+65532\s+65532$`).Match(status) {
			t.Errorf("the image's command does not run as 65532:\n%s", status)
		}
		if dir, err := os.Readlink(fmt.Sprintf("/proc/%d/root", node.Process.Pid)); err != nil || dir != r.Root {
			t.Errorf("the image's command runs with the root directory %q (%v), want %s", dir, err, r.Root)
		}
	}
	codes := []int{first}
	for range 5 {
		code, err := login()
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
	}
	if want := []int{200, 200, 200, 200, 200, 429}; !slices.Equal(codes, want) {
		t.Errorf("six logins a minute through the image's command: %v, want %v (the shipped policy's login-per-visitor)\n%s", codes, want, logs.String())
	}

	health := command(r.Healthcheck)
	if out, err := health.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ready (ok)") {
		t.Errorf("HEALTHCHECK %q on the serving node: %v, output %q; want exit 0, ready", r.Healthcheck, err, out)
	}

	if err := node.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		err := waitErr
		if err != nil {
			t.Errorf("the image's command after SIGTERM (docker stop): %v, want exit 0\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatalf("the image's command has not stopped 30s after SIGTERM\n%s", logs.String())
	}
	health = command(r.Healthcheck)
	out, err := health.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "not ready") {
		t.Errorf("HEALTHCHECK %q on a stopped node: %v, output %q; want exit 1, not ready", r.Healthcheck, err, out)
	}
}

// copyFile copies src to dst (its directories made), keeping its mode.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}
