package storetest

import "github.com/edge-gateway/edge/rules"

// costCases are weighted costs (docs/policy.md, "cost"): a take of cost 3
// takes three units and Remaining says so; settle_from's charge after the
// origin answered (OpAdd of the difference, never refused) runs the
// counter into debt, so that a later request is refused exactly until the
// balance recovers; its refund (OpRefund of the difference) gives units
// back. At the lesson's setting (5 a second, burst 5), 3 taken at 100ms
// and 4 more charged: 2 units of debt. Recovery: the buckets need the 2
// units and one more, 3 × 200ms; fixed_window forgets the window's count
// at its end (900ms); sliding_window carries the 7 into the next window,
// where one more fits once 7×(1−e) + 1 ≤ 5, at e = 3/7 s, 1328.572ms
// after 100ms; sliding_log holds at most Limit timestamps, so the charge
// replaces the oldest with entries at 100ms and the key is full, not in
// debt, for one period (1000ms).
func costCases() []Case {
	var cs []Case
	for _, alg := range algorithms {
		w := expectOf(alg).recover
		cs = append(cs, Case{Name: alg.String() + "/cost_settle_debt", Steps: []Step{
			{At: ms(100), Ops: ops(take("c", alg, 3)), Want: want(allowedLeft(2)), Ignore: IgnoreResetAfter},
			// The settle: 4 more, more than is left, charged all the same.
			{At: ms(100), Ops: ops(op("c", alg, rules.OpAdd, 4)), Want: want(refused), Ignore: IgnoreValues},
			{At: ms(100), Ops: ops(take("c", alg, 1)), Want: want(rules.Result{RetryAfter: ms(w), ResetAfter: ms(w)})},
			{At: ms(100 + w - 0.001), Ops: ops(take("c", alg, 1)), Want: want(rules.Result{RetryAfter: ms(0.001), ResetAfter: ms(0.001)})},
			{At: ms(100 + w), Ops: ops(take("c", alg, 1)), Want: want(ok), Ignore: IgnoreValues},
		}})
		cs = append(cs, Case{Name: alg.String() + "/cost_settle_refund", Steps: []Step{
			{At: ms(100), Ops: ops(take("r", alg, 4)), Want: want(allowedLeft(1)), Ignore: IgnoreResetAfter},
			// The real cost was 2: 2 given back.
			{At: ms(100), Ops: ops(op("r", alg, rules.OpRefund, 2)), Want: want(allowedLeft(3)), Ignore: IgnoreResetAfter},
			{At: ms(100), Ops: ops(take("r", alg, 4)), Want: want(rules.Result{}), Ignore: IgnoreValues},
			{At: ms(100), Ops: ops(take("r", alg, 3)), Want: want(allowedLeft(0)), Ignore: IgnoreResetAfter},
		}})
	}
	// A cost of 3 in a call with a cost-1 op on another key: both charged
	// their own cost, and a refusal of one takes neither.
	a, b := take("ca", rules.GCRA, 3), take("cb", rules.FixedWindow, 1)
	cs = append(cs, Case{Name: "cost/mixed_call", Steps: []Step{
		{At: ms(100), Ops: ops(a, b), Want: want(allowedLeft(2), allowedLeft(4)), Ignore: IgnoreResetAfter},
		{At: ms(100), Ops: ops(a, b), Want: want(refused, allowedLeft(4)), Ignore: IgnoreValues},
		{At: ms(100), Ops: ops(take("ca", rules.GCRA, 2), b), Want: want(allowedLeft(0), allowedLeft(3)), Ignore: IgnoreResetAfter},
	}})
	return cs
}
