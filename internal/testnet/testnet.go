// Package testnet gives tests loopback addresses with a known state. Its one
// helper, DeadAddr, replaces the "listen on :0, note the port, close it"
// idiom: a port closed that way is free for the next test in the package to
// be given, so under t.Parallel a test that wanted "connection refused" can
// reach another test's server instead (CI saw a 503 where a refusal was
// wanted). Nothing outside tests imports it.
package testnet

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// DeadAddr returns a loopback "127.0.0.1:PORT" where a TCP connect is
// refused (ECONNREFUSED) for as long as the test runs. The port is held by a
// socket that is bound but never listens, without SO_REUSEADDR, so the
// kernel neither hands it out for ":0" nor lets another listener bind it;
// a SYN to a bound socket that does not listen is answered with a reset.
// The socket is closed at t's cleanup. It fails t when the socket cannot be
// made. Linux semantics; the tests run on Linux.
func DeadAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("testnet: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("testnet: bind 127.0.0.1:0: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("testnet: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("testnet: getsockname gave %T, want an IPv4 address", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}
