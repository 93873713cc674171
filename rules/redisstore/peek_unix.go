//go:build unix

package redisstore

import "syscall"

// peek reports whether the socket fd holds data to read, without taking
// it and without waiting.
func peek(fd uintptr) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == nil && n > 0
}
