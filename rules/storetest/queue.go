package storetest

import (
	"time"

	"github.com/edge-gateway/edge/rules"
)

// queueCases fix the delay a leaky_bucket rule with queue = true holds an
// admitted request for (queue.Delay, from the store's Result): the time
// the level ahead of it drains, NGINX limit_req's delay. At 5 a second with
// a burst of 20, twenty at one instant wait 0, 200ms, … 3.8s, in arrival
// order, and the 21st is refused; 300ms later the next waits 3.7s (the 20th
// is released at 3.8s, it 200ms after). A cost of 3 at 5 a second, burst 5,
// after 2 units: it waits for the 2 ahead (400ms); 50ms later a cost-1 take
// does not fit (4.75 + 1 > 5) and is refused; 200ms later it fits and waits
// for the 4 units then ahead (800ms).
func queueCases() []Case {
	q := func(key string, cost int64, burst int64) rules.Op {
		o := take(key, rules.LeakyBucket, cost)
		o.Burst = burst
		return o
	}
	burst := Case{Name: "leaky_bucket/queue_delays"}
	for i := range 20 {
		burst.Steps = append(burst.Steps, Step{At: ms(100), Ops: ops(q("q", 1, 20)), Want: want(ok), Ignore: IgnoreValues,
			Delay: []time.Duration{time.Duration(i) * 200 * time.Millisecond}})
	}
	burst.Steps = append(burst.Steps,
		Step{At: ms(100), Ops: ops(q("q", 1, 20)), Want: want(refused), Ignore: IgnoreValues, Delay: []time.Duration{0}},
		Step{At: ms(400), Ops: ops(q("q", 1, 20)), Want: want(ok), Ignore: IgnoreValues, Delay: []time.Duration{ms(3700)}},
	)
	costs := Case{Name: "leaky_bucket/queue_cost", Steps: []Step{
		{At: ms(100), Ops: ops(q("c", 2, 5)), Want: want(ok), Ignore: IgnoreValues, Delay: []time.Duration{0}},
		{At: ms(100), Ops: ops(q("c", 3, 5)), Want: want(ok), Ignore: IgnoreValues, Delay: []time.Duration{ms(400)}},
		{At: ms(150), Ops: ops(q("c", 1, 5)), Want: want(refused), Ignore: IgnoreValues, Delay: []time.Duration{0}},
		{At: ms(300), Ops: ops(q("c", 1, 5)), Want: want(ok), Ignore: IgnoreValues, Delay: []time.Duration{ms(800)}},
	}}
	return []Case{burst, costs}
}
