package testnet

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestDeadAddrRefusesAndIsHeld: a connect to DeadAddr is refused, and the
// port cannot be taken by a listener (Go's listeners set SO_REUSEADDR, as
// every other test's would) while the test runs.
func TestDeadAddrRefusesAndIsHeld(t *testing.T) {
	addr := DeadAddr(t)
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: %v, want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Errorf("listen %s succeeded, want the port held", addr)
	}
}
