package rules

// edgeDecide compiles decide_listen. Owner: the decision-only mode (issue 14, item 7).
func (c *Compiler) edgeDecide(e *edgeBlock) {}
