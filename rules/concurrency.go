package rules

// Concurrency limits: algorithm = "concurrency" (docs/policy.md,
// "Concurrency limits"). Owned by the concurrency slice; see inflight.go for
// the lifecycle.

// appendLeaseRefunds appends the refund of every lease the request holds:
// each consumed concurrency op (and its ip_ceiling op), as OpRefund of its
// lease ID.
func (s *Scratch) appendLeaseRefunds(ops []Op) []Op {
	return ops
}
