//go:build unix

package gateway

import (
	"net"
	"syscall"
)

// maxDiscard bounds what discardPending reads: a refused client's request
// up to the header cap and a little more.
const maxDiscard = 16 << 10

// discardPending reads, without waiting, what the client of a refused
// connection has already sent (its request), up to maxDiscard bytes:
// closing a socket with unread data sends a reset, which may reach the
// client before it reads the answer, while closing a drained one sends a
// FIN after it.
func discardPending(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	var buf [4 << 10]byte
	_ = rc.Control(func(fd uintptr) {
		for n := 0; n < maxDiscard; {
			k, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_DONTWAIT)
			if err != nil || k <= 0 {
				return
			}
			n += k
		}
	})
}
