//go:build linux

package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifySocket is a systemd-like $NOTIFY_SOCKET: a unixgram socket that
// records each datagram with its sender's PID (SCM_CREDENTIALS, as systemd
// reads them to hold NotifyAccess=main).
type notifySocket struct {
	conn *net.UnixConn
	name string
	msgs chan notifyMsg
}

type notifyMsg struct {
	pid  int
	text string
}

func listenNotify(t *testing.T, name string) *notifySocket {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rc, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	s := &notifySocket{conn: conn, name: name, msgs: make(chan notifyMsg, 256)}
	go func() {
		buf, oob := make([]byte, 4096), make([]byte, 1024)
		for {
			n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil {
				close(s.msgs)
				return
			}
			m := notifyMsg{text: string(buf[:n])}
			if cms, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil && len(cms) > 0 {
				if cred, err := syscall.ParseUnixCredentials(&cms[0]); err == nil {
					m.pid = int(cred.Pid)
				}
			}
			s.msgs <- m
		}
	}()
	return s
}

// next returns the next datagram, failing after a hang guard.
func (s *notifySocket) next(t *testing.T) notifyMsg {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			t.Fatal("notify socket closed")
		}
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("no datagram on the notify socket within 20s")
	}
	return notifyMsg{}
}

// await returns the first datagram that has the line want, skipping others.
func (s *notifySocket) await(t *testing.T, want string) notifyMsg {
	t.Helper()
	for {
		m := s.next(t)
		for line := range strings.SplitSeq(m.text, "\n") {
			if line == want {
				return m
			}
		}
	}
}

// TestNotifierSpeaksSdNotify: every state reaches a real unixgram socket,
// by path and by abstract name, as sd_notify(3) sends it.
func TestNotifierSpeaksSdNotify(t *testing.T) {
	for _, name := range []string{
		filepath.Join(t.TempDir(), "notify"),
		fmt.Sprintf("@edge-test-notify-%d-%d", syscall.Getpid(), time.Now().UnixNano()),
	} {
		t.Run(strings.TrimPrefix(filepath.Base(name), "@"), func(t *testing.T) {
			s := listenNotify(t, name)
			t.Setenv("NOTIFY_SOCKET", name)
			n := newNotifier()
			if n == nil {
				t.Fatal("no notifier with $NOTIFY_SOCKET set")
			}
			check := func(what string, err error, want ...string) string {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				m := s.next(t)
				if m.pid != syscall.Getpid() {
					t.Errorf("%s: sent by pid %d, want %d", what, m.pid, syscall.Getpid())
				}
				for _, w := range want {
					if !strings.Contains("\n"+m.text+"\n", "\n"+w+"\n") {
						t.Errorf("%s: got %q, want the line %q", what, m.text, w)
					}
				}
				return m.text
			}
			check("ready", n.ready(), "READY=1")
			before, _ := monotonicUSec()
			text := check("reloading", n.reloading(), "RELOADING=1")
			after, _ := monotonicUSec()
			var us int64 = -1
			for line := range strings.SplitSeq(text, "\n") {
				if v, ok := strings.CutPrefix(line, "MONOTONIC_USEC="); ok {
					us, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			if us < before || us > after {
				t.Errorf("MONOTONIC_USEC=%d, want between %d and %d (CLOCK_MONOTONIC in µs)", us, before, after)
			}
			check("reloaded", n.reloaded(), "READY=1")
			check("handOver", n.handOver(4242), "MAINPID=4242")
			check("stopping", n.stopping(), "STOPPING=1")
		})
	}
}

func TestNotifierWithoutSocketDoesNothing(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n := newNotifier()
	if n != nil {
		t.Fatalf("got a notifier %+v without $NOTIFY_SOCKET", n)
	}
	for _, err := range []error{n.ready(), n.reloading(), n.reloaded(), n.handOver(1), n.stopping()} {
		if err != nil {
			t.Errorf("nil notifier: %v", err)
		}
	}
}

func TestNotifierSocketGoneIsAnError(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	if err := newNotifier().ready(); err == nil {
		t.Error("no error for a socket that does not exist")
	}
}
