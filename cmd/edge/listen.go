package main

import "net"

// openListener opens the named listener ("public", "admin", "decide") on
// addr. Owner: graceful restarts (issue 14, item 8), which hand listeners
// to the new process.
func openListener(name, addr string) (net.Listener, error) {
	return net.Listen("tcp", addr)
}
