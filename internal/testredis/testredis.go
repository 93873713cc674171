// Package testredis starts real redis-server processes on loopback for
// tests that must kill, restart or slow a Redis (the store-failure tests of
// docs/policy.md, "on_store_error"). It is for tests only.
//
// A test that needs a server calls Start, which skips the test when the
// redis-server binary is not installed (CI installs Debian's redis-server,
// so there the tests always run).
package testredis

import (
	"bufio"
	"fmt"
	"net"
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
}

// Start runs a fresh redis-server without persistence on a free loopback
// port and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (CI installs Debian's redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{t: t, Port: port, dir: t.TempDir()}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// Addr is "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is "redis://127.0.0.1:PORT/0".
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

func (s *Server) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server",
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--enable-debug-command", "local")
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
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
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
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
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
