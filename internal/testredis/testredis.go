// Package testredis starts real redis-server processes on loopback for
// tests that must kill, restart or slow a Redis (the store-failure tests of
// docs/policy.md, "on_store_error"). It is for tests only.
//
// A test that needs a server calls Start, which skips the test when the
// redis-server binary is not installed (CI installs Debian's redis-server,
// and sets EDGE_REQUIRE_STACKS=1, under which a missing binary fails the
// test instead). StartTLS runs one that serves TLS only, with a
// certificate from a throwaway CA made in the test (tls.go; NewCA issues
// client certificates too); StartSentinel runs a primary, a replica and a
// sentinel monitoring them, plain or TLS throughout (sentinel.go), for the
// deployments of docs/deploying.md, "Redis over TLS, ACLs and Sentinel".
// NewProxy puts a filtering TCP proxy in front of one (proxy.go), to make
// a healthy Redis look late, silent or cut off.
package testredis

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is one redis-server process on 127.0.0.1.
type Server struct {
	t    testing.TB
	Port int
	cmd  *exec.Cmd
	dir  string

	// extra are more arguments of redis-server (tls.go, sentinel.go);
	// binary is redis-server when empty.
	extra  []string
	binary string
	// tls, when set, is how Do reaches a TLS server (tls.go).
	tls   *tls.Config
	files TLSFiles
	// auth, when set, is the password Do authenticates with first.
	auth string
}

// Start runs a fresh redis-server without persistence on a free loopback
// port and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	requireRedis(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, Port: freePort(t, ln), dir: t.TempDir()}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// StartAuth is Start with requirepass password: the server refuses a
// client that does not authenticate with it (NOAUTH) or gives another
// (WRONGPASS). Do authenticates with it.
func StartAuth(t testing.TB, password string) *Server {
	t.Helper()
	requireRedis(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, Port: freePort(t, ln), dir: t.TempDir(), extra: []string{"--requirepass", password}, auth: password}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// requireRedis skips t when redis-server is not installed, or fails it
// under EDGE_REQUIRE_STACKS=1 (CI, which installs it).
func requireRedis(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("EDGE_REQUIRE_STACKS") == "1" {
			t.Fatal("redis-server is not installed (EDGE_REQUIRE_STACKS=1: .ci/run installs Debian's redis-server)")
		}
		t.Skip("redis-server is not installed (CI installs Debian's redis-server)")
	}
}

// freePort returns ln's port, closing ln.
func freePort(t testing.TB, ln net.Listener) int {
	t.Helper()
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// Addr is "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is "redis://127.0.0.1:PORT/0", or "rediss://…" for a TLS server.
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// TLS returns the files a client of a TLS server needs (zero for a plain
// one): the CA that signed the server's certificate and a client
// certificate it signed.
func (s *Server) TLS() TLSFiles { return s.files }

func (s *Server) start() {
	s.t.Helper()
	bin := s.binary
	if bin == "" {
		bin = "redis-server"
	}
	args := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--enable-debug-command", "local"}
	if s.binary != "" { // a sentinel: its config file first
		args = nil
	}
	if s.tls != nil && args != nil {
		args[1] = "0" // TLS only: the port is --tls-port's
	}
	s.cmd = exec.Command(bin, append(args, s.extra...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := s.Do("PING"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling for startup, not for correctness
	}
	s.t.Fatalf("redis-server on port %d did not start", s.Port)
}

// Kill stops the server at once (SIGKILL), as a crash would. Idempotent.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// Do sends one command over a new connection and returns the reply as
// text: a simple string, an error, an integer, or a bulk string; arrays
// come back with their elements one per line.
func (s *Server) Do(args ...string) (string, error) {
	c, err := s.dial()
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	if s.auth != "" {
		fmt.Fprintf(&b, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(s.auth), s.auth)
	}
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	if s.auth != "" {
		if _, err := readReply(r); err != nil {
			return "", err
		}
	}
	return readReply(r)
}

// dial connects to the server, over TLS when it serves TLS.
func (s *Server) dial() (net.Conn, error) {
	if s.tls != nil {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: s.tls}
		return d.Dial("tcp", s.Addr())
	}
	return net.DialTimeout("tcp", s.Addr(), time.Second)
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var parts []string
		for range max(n, 0) {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// CommandCalls returns the calls count of one command from INFO
// commandstats (0 when it was never called), e.g. "evalsha".
func (s *Server) CommandCalls(cmd string) (int, error) {
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		return 0, err
	}
	prefix := "cmdstat_" + cmd + ":calls="
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
			return n, nil
		}
	}
	return 0, nil
}

// Keys returns every key (SCAN, so it works on big databases too).
func (s *Server) Keys() ([]string, error) {
	var keys []string
	cursor := "0"
	for {
		c, err := s.dial()
		if err != nil {
			return nil, err
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "*4\r\n$4\r\nSCAN\r\n$%d\r\n%s\r\n$5\r\nCOUNT\r\n$4\r\n1000\r\n", len(cursor), cursor)
		r := bufio.NewReader(c)
		head, err := r.ReadString('\n') // *2
		if err != nil || !strings.HasPrefix(head, "*2") {
			c.Close()
			return nil, fmt.Errorf("scan: %q %v", head, err)
		}
		next, err := readReply(r)
		if err != nil {
			c.Close()
			return nil, err
		}
		list, err := readReply(r)
		c.Close()
		if err != nil {
			return nil, err
		}
		if list != "" {
			keys = append(keys, strings.Split(list, "\n")...)
		}
		if cursor = next; cursor == "0" {
			return keys, nil
		}
	}
}

// Clients returns the number of clients connected now (INFO clients'
// connected_clients), less the one asking.
func (s *Server) Clients(t testing.TB) int {
	t.Helper()
	info, err := s.Do("INFO", "clients")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_clients:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n - 1
		}
	}
	t.Fatal("INFO clients has no connected_clients")
	return 0
}
