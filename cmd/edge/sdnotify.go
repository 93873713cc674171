package main

import (
	"fmt"
	"net"
	"os"
)

// notifier tells systemd about the node's state through $NOTIFY_SOCKET,
// the sd_notify(3) protocol: one datagram of newline-separated KEY=VALUE
// assignments to a unixgram socket, whose name starts with '@' for an
// abstract one (Go's net package maps it to the leading NUL). The unit
// (deploy/edge.service: Type=notify, NotifyAccess=main) waits for READY=1
// before it counts the node as started (docs/deploying.md, "Graceful
// restarts and binary upgrades"). A nil notifier, which newNotifier
// returns without $NOTIFY_SOCKET, does nothing.
type notifier struct {
	addr *net.UnixAddr
}

// newNotifier returns the notifier of $NOTIFY_SOCKET, or nil when it is
// unset. The variable stays set: a binary upgrade's new process, which
// becomes the unit's main process, notifies the same socket.
func newNotifier() *notifier {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	return &notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}
}

// send sends one datagram of state lines. A socket that is gone (the node
// was started by hand with a stale variable) is an error for the caller to
// log; it never stops the node.
func (n *notifier) send(state string) error {
	if n == nil {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("notifying systemd at %s: %w", n.addr.Name, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("notifying systemd at %s: %w", n.addr.Name, err)
	}
	return nil
}

// ready says the node serves (READY=1).
func (n *notifier) ready() error { return n.send("READY=1\nSTATUS=serving") }

// reloading says a reload started: RELOADING=1 with MONOTONIC_USEC, the
// CLOCK_MONOTONIC time in µs, which systemd (v253 and later) compares with
// the time it asked for the reload; ready follows once it is done,
// whatever its outcome (a refused reload keeps the node serving).
func (n *notifier) reloading() error {
	if n == nil {
		return nil
	}
	msg := "RELOADING=1\nSTATUS=reloading the policy"
	if us, ok := monotonicUSec(); ok {
		msg += fmt.Sprintf("\nMONOTONIC_USEC=%d", us)
	}
	return n.send(msg)
}

// reloaded ends a reload: READY=1 again.
func (n *notifier) reloaded() error { return n.send("READY=1\nSTATUS=serving") }

// handOver says the binary upgrade's new process, pid, is the unit's main
// process now (MAINPID=), sent by the old process, still the main one,
// once the new one is ready to serve. The new process sends READY=1 itself
// once it serves.
func (n *notifier) handOver(pid int) error {
	return n.send(fmt.Sprintf("MAINPID=%d\nSTATUS=handing over to the upgraded process %d", pid, pid))
}

// stopping says the node is shutting down (STOPPING=1). Not sent by an old
// process that handed over: it is no longer the main process, and its
// STOPPING=1 would stop the unit.
func (n *notifier) stopping() error { return n.send("STOPPING=1\nSTATUS=stopping") }
