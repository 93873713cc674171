//go:build !unix

package main

import (
	"errors"
	"net"
	"time"
)

// peek reads what is waiting on c, waiting at most a millisecond for it:
// n bytes into buf, or eof when the peer closed it.
func peek(c net.Conn, buf []byte) (n int, eof bool, err error) {
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	n, err = c.Read(buf)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return n, false, nil
	case err != nil:
		return n, true, nil
	}
	return n, false, nil
}
