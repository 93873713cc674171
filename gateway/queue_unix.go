//go:build unix

package gateway

import "syscall"

// peekClosed reports whether the socket fd's peer has closed or reset it:
// a peek that reads 0 bytes (end of stream) or fails with ECONNRESET.
func peekClosed(fd uintptr) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == nil && n == 0 || err == syscall.ECONNRESET
}
