//go:build !linux

package main

// monotonicUSec has no CLOCK_MONOTONIC to read outside Linux, where
// systemd does not run either: RELOADING=1 goes without MONOTONIC_USEC.
func monotonicUSec() (int64, bool) { return 0, false }
