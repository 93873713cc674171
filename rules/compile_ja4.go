package rules

// edgeJA4 compiles ja4_header. Owner: the JA4 work (issue 14, item 2).
func (c *Compiler) edgeJA4(e *edgeBlock) {}
