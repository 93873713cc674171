package gateway

import "net"

// wrapTLS returns ln serving TLS when the policy has a tls block, ln
// itself otherwise. Owner: the TLS listener work (issue 14, item 1).
func (s *Server) wrapTLS(ln net.Listener) net.Listener { return ln }
