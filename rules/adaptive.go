package rules

// Adaptive concurrency: adaptive { } (docs/policy.md, "Adaptive
// concurrency"). Owned by the adaptive slice; see inflight.go for the
// lifecycle.
