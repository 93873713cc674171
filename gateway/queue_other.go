//go:build !unix

package gateway

// peekClosed cannot tell off unix: a held request is always forwarded.
func peekClosed(uintptr) bool { return false }
