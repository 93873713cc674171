package differential

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fields are the identity fields every origin reads and echoes, in the
// order of the echo.
var fields = []string{"phone", "username", "email", "challenge_id", "code"}

// stack is one origin stack: its variants (one route per idiom,
// /v/VARIANT) and how to start it.
type stack struct {
	name     string
	variants []string
	// start starts the origin and returns its address (HOST:PORT); it
	// skips the test (or fails it, under EDGE_REQUIRE_STACKS=1) when the
	// stack is not installed.
	start func(t *testing.T) string
}

// stacks are the origin stacks, as the issue names them: Go's net/http in
// process, and real processes of Debian's packages for the rest (the
// Debian paths: a pyenv python3 first on PATH has no Flask).
var stacks = []stack{
	{
		name:     "go",
		variants: []string{"go-formvalue", "go-postformvalue", "go-parseform", "go-json-struct", "go-json-map"},
		start:    startGo,
	},
	{
		name:     "php",
		variants: []string{"php-post", "php-request", "php-json", "php-parse-str"},
		start: processStack(process{
			bin:  "/usr/bin/php",
			args: func(port int) []string { return []string{"-S", "127.0.0.1:" + strconv.Itoa(port), "app.php"} },
			dir:  "php",
		}),
	},
	{
		name:     "flask",
		variants: []string{"flask-form", "flask-values", "flask-json", "flask-json-force"},
		start: processStack(process{
			bin:   "/usr/bin/python3",
			check: []string{"-c", "import flask"},
			args:  func(port int) []string { return []string{"app.py", strconv.Itoa(port)} },
			dir:   "flask",
		}),
	},
	{
		name:     "django",
		variants: []string{"django-post", "django-json"},
		start: processStack(process{
			bin:   "/usr/bin/python3",
			check: []string{"-c", "import django"},
			args:  func(port int) []string { return []string{"app.py", strconv.Itoa(port)} },
			dir:   "django",
		}),
	},
	{
		name:     "express",
		variants: []string{"express-extended", "express-simple"},
		start: processStack(process{
			bin:   "/usr/bin/node",
			check: []string{"-e", "require('express')"},
			env:   []string{"NODE_PATH=/usr/share/nodejs"},
			args:  func(port int) []string { return []string{"app.js", strconv.Itoa(port)} },
			dir:   "express",
		}),
	},
	{
		name:     "rack",
		variants: []string{"rack-post", "rack-params", "rack-json"},
		start: processStack(process{
			bin:   "/usr/bin/ruby",
			check: []string{"-e", "require 'rack'; require 'webrick'; Rack::Handler::WEBrick"},
			args:  func(port int) []string { return []string{"app.rb", strconv.Itoa(port)} },
			dir:   "rack",
		}),
	},
}

// missing skips the test, or fails it when CI requires every stack
// (EDGE_REQUIRE_STACKS=1, set by .ci/run, which installs them).
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("EDGE_REQUIRE_STACKS") == "1" {
		t.Fatalf(format+" (EDGE_REQUIRE_STACKS=1: every stack must run)", args...)
	}
	t.Skipf(format, args...)
}

// process is an origin app run by an interpreter.
type process struct {
	bin   string
	check []string // arguments of a command that fails when the framework is missing
	env   []string
	args  func(port int) []string
	dir   string // under testdata/origins/
}

// foreignEnv are variables that would point Debian's interpreters at
// another installation's modules or configuration (a pyenv's PYTHONPATH,
// a PHPRC whose php.ini sets another request_order): the origins run
// without them.
var foreignEnv = []string{
	"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "RUBYLIB", "RUBYOPT", "GEM_HOME", "GEM_PATH",
	"BUNDLE_GEMFILE", "NODE_OPTIONS", "PHPRC", "PHP_INI_SCAN_DIR", "PHP_CLI_SERVER_WORKERS",
}

// originEnv is the test's environment without foreignEnv, plus extra.
func originEnv(extra []string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, k := range foreignEnv {
			if strings.HasPrefix(kv, k+"=") {
				continue next
			}
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// readyDeadline bounds an origin's start-up (an interpreter loading its
// framework on a busy machine); readiness itself is the health answer.
const readyDeadline = 60 * time.Second

func processStack(p process) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		if _, err := os.Stat(p.bin); err != nil {
			missing(t, "%s is not installed: %v", p.bin, err)
		}
		if p.check != nil {
			cmd := exec.Command(p.bin, p.check...)
			cmd.Env = originEnv(p.env)
			if out, err := cmd.CombinedOutput(); err != nil {
				missing(t, "%s %q: %v\n%s", p.bin, p.check, err, out)
			}
		}
		dir, err := filepath.Abs(filepath.Join("testdata", "origins", p.dir))
		if err != nil {
			t.Fatal(err)
		}
		// A free port can be taken between our probe of it and the
		// origin's bind: an origin that exits before it is ready is
		// started again on another.
		var lastErr error
		for range 3 {
			addr, err := startProcess(t, p, dir)
			if err == nil {
				return addr
			}
			lastErr = err
		}
		t.Fatal(lastErr)
		return ""
	}
}

// startProcess starts p on a free loopback port and waits until its
// /health answers 200, the process exits, or readyDeadline passes. The
// process (its own process group) is killed on cleanup, or when the test
// binary dies.
func startProcess(t *testing.T, p process, dir string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(p.bin, p.args(port)...)
	cmd.Dir = dir
	cmd.Env = originEnv(p.env)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting %s: %w", p.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		killOrigin(cmd)
		<-exited
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(readyDeadline)
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := hc.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(func() {
					stop()
					if t.Failed() {
						t.Logf("%s output:\n%s", p.dir, out.String())
					}
				})
				return addr, nil
			}
		}
		select {
		case <-exited:
			return "", fmt.Errorf("%s exited before it was ready:\n%s", p.dir, out.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("%s not ready after %v:\n%s", p.dir, readyDeadline, out.String())
		}
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a bytes.Buffer safe for the process's writers and the
// test's reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 1<<20 {
		return len(p), nil // enough to diagnose; drop the rest
	}
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// echo is what an origin answers: what each idiom read.
type echo struct {
	Variant string             `json:"variant"`
	CT      string             `json:"ct"` // hex of the Content-Type the app saw
	Fields  map[string]reading `json:"fields"`
	Error   string             `json:"error"`
}

// reading is one field as an idiom read it: its type in the app's
// language and every string leaf, hex-encoded bytes (a JSON number, a
// boolean as the language prints it; an array's or object's elements).
type reading struct {
	Type   string   `json:"type"`
	Values []string `json:"values"`
}

// variantHeader marks an answer from an origin app (never from the edge).
const variantHeader = "X-Differential-Variant"

// startGo serves Go's net/http idioms in process, on a loopback httptest
// server:
//
//	/v/go-formvalue      r.FormValue(NAME) (ParseMultipartForm: query and body, body first)
//	/v/go-postformvalue  r.PostFormValue(NAME) (the body's form or multipart)
//	/v/go-parseform      r.ParseForm(), answering 400 on its error, then r.Form.Get(NAME)
//	/v/go-json-struct    json.NewDecoder(r.Body).Decode(&struct{Phone string `json:"phone"` …})
//	/v/go-json-map       json.Unmarshal(body, &map[string]any)
func startGo(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(goOrigin())
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func goOrigin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/probe/", func(w http.ResponseWriter, r *http.Request) { writeEcho(w, r, "probe", nil, "") })
	str := func(get func(string) string) func(string) any {
		return func(f string) any {
			if v := get(f); v != "" {
				return v
			}
			return nil
		}
	}
	mux.HandleFunc("/v/go-formvalue", func(w http.ResponseWriter, r *http.Request) {
		writeEcho(w, r, "go-formvalue", str(r.FormValue), "")
	})
	mux.HandleFunc("/v/go-postformvalue", func(w http.ResponseWriter, r *http.Request) {
		writeEcho(w, r, "go-postformvalue", str(r.PostFormValue), "")
	})
	mux.HandleFunc("/v/go-parseform", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			writeEcho(w, r, "go-parseform", nil, err.Error())
			return
		}
		writeEcho(w, r, "go-parseform", str(r.Form.Get), "")
	})
	mux.HandleFunc("/v/go-json-struct", func(w http.ResponseWriter, r *http.Request) {
		var s struct {
			Phone       string `json:"phone"`
			Username    string `json:"username"`
			Email       string `json:"email"`
			ChallengeID string `json:"challenge_id"`
			Code        string `json:"code"`
		}
		if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
			writeEcho(w, r, "go-json-struct", nil, err.Error())
			return
		}
		m := map[string]string{"phone": s.Phone, "username": s.Username, "email": s.Email, "challenge_id": s.ChallengeID, "code": s.Code}
		writeEcho(w, r, "go-json-struct", str(func(f string) string { return m[f] }), "")
	})
	mux.HandleFunc("/v/go-json-map", func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(r.Body); err != nil {
			writeEcho(w, r, "go-json-map", nil, err.Error())
			return
		}
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			writeEcho(w, r, "go-json-map", nil, err.Error())
			return
		}
		writeEcho(w, r, "go-json-map", func(f string) any { return m[f] }, "")
	})
	return mux
}

// writeEcho answers as the process origins do (their echo format).
func writeEcho(w http.ResponseWriter, r *http.Request, variant string, get func(string) any, errText string) {
	e := echo{Variant: variant, CT: hex.EncodeToString([]byte(r.Header.Get("Content-Type"))), Fields: map[string]reading{}, Error: errText}
	for _, f := range fields {
		var v any
		if get != nil {
			v = get(f)
		}
		if v == nil {
			e.Fields[f] = reading{Type: "absent", Values: []string{}}
			continue
		}
		var leaves []string
		goLeaves(v, &leaves)
		e.Fields[f] = reading{Type: fmt.Sprintf("%T", v), Values: leaves}
	}
	w.Header().Set(variantHeader, variant)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(e)
}

// goLeaves appends v's string leaves, hex-encoded: a string as it is, a
// number as its shortest decimal text without an exponent (what an app
// that wants a phone's digits writes, and JavaScript's String(n) for
// integers), anything else as fmt prints it.
func goLeaves(v any, out *[]string) {
	switch x := v.(type) {
	case nil:
	case float64:
		*out = append(*out, hex.EncodeToString([]byte(strconv.FormatFloat(x, 'f', -1, 64))))
	case map[string]any:
		for _, y := range x {
			goLeaves(y, out)
		}
	case []any:
		for _, y := range x {
			goLeaves(y, out)
		}
	default:
		*out = append(*out, hex.EncodeToString([]byte(fmt.Sprint(x))))
	}
}
