package main

import (
	"syscall"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC (linux/time.h).
const clockMonotonic = 1

// monotonicUSec reads CLOCK_MONOTONIC in µs, the clock of sd_notify's
// MONOTONIC_USEC (Go's time package keeps its monotonic reading private).
func monotonicUSec() (int64, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return ts.Nano() / 1000, true
}
