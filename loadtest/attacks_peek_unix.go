//go:build unix

package main

import (
	"errors"
	"net"
	"syscall"
)

// peek reads what is waiting on c without waiting for more: n bytes into
// buf, or eof when the peer closed it; neither when nothing came (one
// non-blocking read(2): a read deadline already past would return before
// reading at all).
func peek(c net.Conn, buf []byte) (n int, eof bool, err error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false, err
	}
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), buf)
		return true
	}); err != nil {
		return 0, false, err
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN):
		return 0, false, nil
	case errors.Is(rerr, syscall.ECONNRESET):
		return 0, true, nil
	case rerr != nil:
		return 0, false, rerr
	}
	return n, n == 0, nil
}
