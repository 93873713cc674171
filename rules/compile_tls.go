package rules

// tlsBlock is `edge { tls { } }`. Owner: the TLS listener work (issue 14, item 1).
type tlsBlock struct{}

// ListenerTLS is the compiled tls block.
type ListenerTLS struct{}

// edgeTLS compiles the tls block.
func (c *Compiler) edgeTLS(e *edgeBlock) {}
