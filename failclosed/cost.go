package failclosed

import "github.com/edge-gateway/edge/rules"

// localCost is a weighted op's cost in its local fallback bucket
// (docs/policy.md, "Weighted costs"): at most what the bucket can hold, its
// burst for gcra and the buckets, its limit for the windows. The policy
// caps a cost at the rule's own capacity, but the local bucket holds that
// divided by the fleet size: a request costing more would be refused for
// as long as the store is down, whatever the node had spent. Clamped, it
// takes the whole local bucket, which refills as any other.
func localCost(op *rules.Op) int64 {
	capacity := op.Limit
	switch op.Algorithm {
	case rules.GCRA, rules.TokenBucket, rules.LeakyBucket:
		capacity = op.Burst
	}
	return min(op.Cost, max(capacity, 1))
}
