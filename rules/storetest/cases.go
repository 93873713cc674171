package storetest

import (
	"math"
	"time"

	"github.com/edge-gateway/edge/rules"
)

const second = 1_000_000 // µs

// op is an op at the lesson's Figure 1 setting: 5 per second, burst 5.
func op(key string, alg rules.Algorithm, kind rules.OpKind, cost int64) rules.Op {
	return rules.Op{Kind: kind, Algorithm: alg, Key: Key(key), Limit: 5, Burst: 5, PeriodUS: second, Cost: cost, Enforce: true}
}

func take(key string, alg rules.Algorithm, cost int64) rules.Op {
	return op(key, alg, rules.OpTake, cost)
}

func peek(key string, alg rules.Algorithm, cost int64) rules.Op {
	return op(key, alg, rules.OpPeek, cost)
}

func dry(o rules.Op) rules.Op      { o.Enforce = false; return o }
func attempts(o rules.Op) rules.Op { o.Attempts = true; return o }

// ms converts milliseconds, fractions down to the microsecond included.
func ms(v float64) time.Duration { return time.Duration(math.Round(v*1000)) * time.Microsecond }

func ops(o ...rules.Op) []rules.Op          { return o }
func want(r ...rules.Result) []rules.Result { return r }

var (
	ok      = rules.Result{Allowed: true}
	refused = rules.Result{}
)

// allowedLeft is an allowed result with n units left.
func allowedLeft(n int64) rules.Result { return rules.Result{Allowed: true, Remaining: n} }

// fresh is a full counter's result at Base+at at the lesson's setting: all
// five units left, and its effective window (counter.Settle, RateLimit's
// t), the algorithm's expectation.window.
func fresh(alg rules.Algorithm, at time.Duration) rules.Result {
	e := (at%time.Second + time.Second) % time.Second // Base is a multiple of 1s
	return rules.Result{Allowed: true, Remaining: 5, ResetAfter: expectOf(alg).window(e)}
}

// single is a one-op step of a values table: full results compared.
type single struct {
	at       float64 // ms after Base
	kind     rules.OpKind
	cost     int64
	attempts bool
	want     rules.Result
}

func singles(alg rules.Algorithm, key string, ss []single) []Step {
	steps := make([]Step, len(ss))
	for i, s := range ss {
		o := op(key, alg, s.kind, s.cost)
		o.Attempts = s.attempts
		steps[i] = Step{At: ms(s.at), Ops: ops(o), Want: want(s.want)}
	}
	return steps
}

// Cases returns the static tables every store replays (the seed trace comes
// from SeedTraceCases).
func Cases() []Case {
	var cs []Case
	cs = append(cs, gcraLesson())
	cs = append(cs, valueCases()...)
	for _, alg := range algorithms {
		cs = append(cs,
			allOrNothing(alg),
			dryRun(alg),
			kinds(alg),
			expiry(alg),
			costOverBurst(alg),
			clockBackwards(alg),
			retryAdmitted(alg),
			withRoomyBudget(allOrNothing(alg)),
			withRoomyBudget(kinds(alg)),
		)
	}
	cs = append(cs, attemptRetryCases()...)
	cs = append(cs, slidingWindowReport())
	cs = append(cs, epochCases()...)
	cs = append(cs, algorithmChange())
	cs = append(cs, distinctCases()...)
	cs = append(cs, calendarCases()...) // calendar.go
	for _, c := range distinctCases()[:3] {
		cs = append(cs, withRoomyBudget(c))
	}
	cs = append(cs, invalidCases())
	cs = append(cs, costCases()...)  // cost.go
	cs = append(cs, queueCases()...) // queue.go
	return cs
}

// gcraLesson is the lesson's worked GCRA numbers: 5 a second, burst 5, six
// requests at t=0 push TAT to 200…1000ms; the sixth would make it 1200ms,
// 200ms over, so it is refused and may retry in 200ms (t = Retry-After), and
// a retry then is admitted. Whatever is left, one unit more than that comes
// back 200ms after it is spent: t is 200ms throughout.
func gcraLesson() Case {
	c := Case{Name: "gcra/lesson_six_at_once"}
	for i := range int64(5) {
		c.Steps = append(c.Steps, Step{
			Ops:  ops(take("six", rules.GCRA, 1)),
			Want: want(rules.Result{Allowed: true, Remaining: 4 - i, ResetAfter: ms(200)}),
		})
	}
	c.Steps = append(c.Steps, Step{
		Ops:  ops(take("six", rules.GCRA, 1)),
		Want: want(rules.Result{ResetAfter: ms(200), RetryAfter: ms(200)}),
	}, Step{
		At:   ms(199.999),
		Ops:  ops(take("six", rules.GCRA, 1)),
		Want: want(rules.Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}),
	}, Step{
		At:   ms(200),
		Ops:  ops(take("six", rules.GCRA, 1)),
		Want: want(rules.Result{Allowed: true, ResetAfter: ms(200)}),
	})
	return c
}

// valueCases fix Remaining, ResetAfter and RetryAfter, costs above 1 and
// every op kind, algorithm by algorithm.
func valueCases() []Case {
	// gcra, token_bucket and leaky_bucket decide and report alike when the
	// emission interval is exact (here 200ms).
	buckets := []single{
		// ResetAfter is the effective window (RateLimit's t): one unit more
		// than Remaining comes back 200ms after they are spent; when
		// refused, the wait, equal to RetryAfter.
		{at: 0, kind: rules.OpPeek, cost: 1, want: fresh(rules.GCRA, 0)},
		{at: 0, kind: rules.OpTake, cost: 1, want: rules.Result{Allowed: true, Remaining: 4, ResetAfter: ms(200)}},
		{at: 0, kind: rules.OpTake, cost: 3, want: rules.Result{Allowed: true, Remaining: 1, ResetAfter: ms(200)}},
		{at: 0, kind: rules.OpTake, cost: 2, want: rules.Result{ResetAfter: ms(200), RetryAfter: ms(200)}},
		{at: 0, kind: rules.OpTake, cost: 6, want: rules.Result{ResetAfter: ms(200), RetryAfter: rules.RetryNever}},
		{at: 100, kind: rules.OpTake, cost: 1, want: rules.Result{Allowed: true, ResetAfter: ms(100)}},
		{at: 150, kind: rules.OpPeek, cost: 1, want: rules.Result{ResetAfter: ms(50), RetryAfter: ms(50)}},
		// An attempt over the limit leaves the counter full, not in debt,
		// and its wait is from there: a retry after 850ms would be refused.
		{at: 150, kind: rules.OpTake, cost: 5, attempts: true, want: rules.Result{ResetAfter: ms(1000), RetryAfter: ms(1000)}},
		{at: 150, kind: rules.OpRefund, cost: 2, want: rules.Result{Allowed: true, Remaining: 2, ResetAfter: ms(200)}},
		{at: 150, kind: rules.OpRefund, cost: 50, want: fresh(rules.GCRA, 0)},
		// Add counts after the fact, into at most one allowance of debt.
		{at: 200, kind: rules.OpAdd, cost: 3, want: rules.Result{Allowed: true, Remaining: 2, ResetAfter: ms(200)}},
		{at: 200, kind: rules.OpAdd, cost: 4, want: rules.Result{ResetAfter: ms(1200), RetryAfter: ms(1200)}},
		{at: 200, kind: rules.OpTake, cost: 1, want: rules.Result{ResetAfter: ms(600), RetryAfter: ms(600)}},
		{at: 200, kind: rules.OpAdd, cost: 1 << 40, want: rules.Result{ResetAfter: ms(1200), RetryAfter: rules.RetryNever}},
		{at: 1400, kind: rules.OpPeek, cost: 2, want: rules.Result{ResetAfter: ms(200), RetryAfter: ms(200)}},
		{at: 1400, kind: rules.OpPeek, cost: 1, want: rules.Result{Allowed: true, Remaining: 1, ResetAfter: ms(200)}},
		{at: 1600, kind: rules.OpTake, cost: 1, want: rules.Result{Allowed: true, Remaining: 1, ResetAfter: ms(200)}},
		{at: 1600, kind: rules.OpReset, cost: 1, want: fresh(rules.GCRA, 0)},
		{at: 1600, kind: rules.OpTake, cost: 5, want: rules.Result{Allowed: true, ResetAfter: ms(200)}},
		{at: 2600, kind: rules.OpTake, cost: 5, want: rules.Result{Allowed: true, ResetAfter: ms(200)}},
		{at: 3600, kind: rules.OpTake, cost: 0, want: fresh(rules.GCRA, 0)},
	}
	var cs []Case
	for _, alg := range []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.LeakyBucket} {
		cs = append(cs, Case{Name: alg.String() + "/values", Steps: singles(alg, "v", buckets)})
	}
	cs = append(cs, Case{Name: "fixed_window/values", Steps: singles(rules.FixedWindow, "v", []single{
		// However many are left, none more before the window ends.
		{at: 300, kind: rules.OpPeek, cost: 1, want: fresh(rules.FixedWindow, ms(300))},
		{at: 300, kind: rules.OpTake, cost: 1, want: rules.Result{Allowed: true, Remaining: 4, ResetAfter: ms(700)}},
		{at: 400, kind: rules.OpTake, cost: 4, want: rules.Result{Allowed: true, ResetAfter: ms(600)}},
		{at: 500, kind: rules.OpTake, cost: 1, want: rules.Result{ResetAfter: ms(500), RetryAfter: ms(500)}},
		{at: 500, kind: rules.OpTake, cost: 6, want: rules.Result{ResetAfter: ms(500), RetryAfter: rules.RetryNever}},
		{at: 500, kind: rules.OpRefund, cost: 2, want: rules.Result{Allowed: true, Remaining: 2, ResetAfter: ms(500)}},
		{at: 500, kind: rules.OpAdd, cost: 100, want: rules.Result{ResetAfter: ms(500), RetryAfter: rules.RetryNever}},
		{at: 999.999, kind: rules.OpTake, cost: 1, want: rules.Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
		// The window starts at 1s since the epoch, not 1s after the first
		// request, and the count before it is gone.
		{at: 1000, kind: rules.OpTake, cost: 5, want: rules.Result{Allowed: true, ResetAfter: ms(1000)}},
		{at: 1000, kind: rules.OpReset, cost: 1, want: fresh(rules.FixedWindow, ms(1000))},
	})})
	cs = append(cs, Case{Name: "sliding_window/values", Steps: singles(rules.SlidingWindow, "v", []single{
		// Five spent at 300ms: the next fits at 1.2s, once 5×(1−e) + 1 ≤ 5
		// in the next window (e = 200ms).
		{at: 300, kind: rules.OpTake, cost: 1, want: rules.Result{Allowed: true, Remaining: 4, ResetAfter: ms(900)}},
		{at: 300, kind: rules.OpTake, cost: 4, want: rules.Result{Allowed: true, ResetAfter: ms(900)}},
		{at: 300, kind: rules.OpTake, cost: 1, want: rules.Result{ResetAfter: ms(900), RetryAfter: ms(900)}},
		{at: 1199.999, kind: rules.OpTake, cost: 1, want: rules.Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
		// The lesson: "5 × 0.8 + 0 = 4 and the request passes as the fifth";
		// the next once 5×(1−e) + 1 + 1 ≤ 5, at e = 400ms.
		{at: 1200, kind: rules.OpTake, cost: 1, want: rules.Result{Allowed: true, ResetAfter: ms(200)}},
		// At 1.5s: 5×0.5 + 1 = 3.5, so one more unit fits, not two (the
		// second at e = 600ms).
		{at: 1500, kind: rules.OpPeek, cost: 1, want: rules.Result{Allowed: true, Remaining: 1, ResetAfter: ms(100)}},
		{at: 1500, kind: rules.OpTake, cost: 2, want: rules.Result{ResetAfter: ms(100), RetryAfter: ms(100)}},
		{at: 1600, kind: rules.OpTake, cost: 2, want: rules.Result{Allowed: true, ResetAfter: ms(200)}},
		// A refund larger than this window's count reaches into the last.
		{at: 1600, kind: rules.OpRefund, cost: 4, want: rules.Result{Allowed: true, Remaining: 3, ResetAfter: ms(150)}},
		{at: 2000, kind: rules.OpTake, cost: 5, want: rules.Result{Allowed: true, ResetAfter: ms(1200)}},
		{at: 4000, kind: rules.OpPeek, cost: 5, want: fresh(rules.SlidingWindow, ms(4000))},
	})})
	cs = append(cs, Case{Name: "sliding_log/values", Steps: singles(rules.SlidingLog, "v", []single{
		// The next unit fits once the oldest timestamp has left.
		{at: 300, kind: rules.OpTake, cost: 1, want: rules.Result{Allowed: true, Remaining: 4, ResetAfter: ms(1000)}},
		{at: 400, kind: rules.OpTake, cost: 2, want: rules.Result{Allowed: true, Remaining: 2, ResetAfter: ms(900)}},
		{at: 700, kind: rules.OpTake, cost: 2, want: rules.Result{Allowed: true, ResetAfter: ms(600)}},
		// Two units must leave: the 300ms one at 1.3s, the 400ms ones at 1.4s.
		{at: 800, kind: rules.OpTake, cost: 2, want: rules.Result{ResetAfter: ms(600), RetryAfter: ms(600)}},
		{at: 800, kind: rules.OpTake, cost: 6, want: rules.Result{ResetAfter: ms(500), RetryAfter: rules.RetryNever}},
		// A unit is out of the window exactly when t ≤ now − period.
		{at: 1299.999, kind: rules.OpTake, cost: 1, want: rules.Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
		{at: 1300, kind: rules.OpTake, cost: 1, want: rules.Result{Allowed: true, ResetAfter: ms(100)}},
		// A refund gives back the newest unit.
		{at: 1300, kind: rules.OpRefund, cost: 1, want: rules.Result{Allowed: true, Remaining: 1, ResetAfter: ms(100)}},
		// An attempt over the limit keeps the newest Limit timestamps, its
		// own, and waits from there.
		{at: 1500, kind: rules.OpTake, cost: 5, attempts: true, want: rules.Result{ResetAfter: ms(1000), RetryAfter: ms(1000)}},
		{at: 2499.999, kind: rules.OpPeek, cost: 1, want: rules.Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)}},
		{at: 2500, kind: rules.OpPeek, cost: 5, want: fresh(rules.SlidingLog, ms(2500))},
	})})
	return cs
}

// allOrNothing: a refused request consumes from no take op, except
// attempts ops; add ops always count.
func allOrNothing(alg rules.Algorithm) Case {
	const values = IgnoreResetAfter | IgnoreRetryAfter
	at, later := ms(100), ms(3100) // every state of at has decayed by later
	return Case{Name: alg.String() + "/all_or_nothing", Steps: []Step{
		{At: at, Ops: ops(take("tight", alg, 5)), Want: want(allowedLeft(0)), Ignore: values},
		// "roomy" allows on its own, but "tight" refuses the request.
		{At: at, Ops: ops(take("roomy", alg, 1), take("tight", alg, 1)), Want: want(allowedLeft(5), refused), Ignore: values},
		{At: at, Ops: ops(peek("roomy", alg, 5)), Want: want(fresh(alg, at))},
		// The same the other way round: the refusing op first.
		{At: at, Ops: ops(take("tight", alg, 1), take("roomy", alg, 2)), Want: want(refused, allowedLeft(5)), Ignore: values},
		{At: at, Ops: ops(peek("roomy", alg, 5)), Want: want(fresh(alg, at))},
		// An attempts op in a refused request makes no new key (a tester's
		// finding F1 on issue 24: an attacker refused by its per-IP limit
		// filled an attempts rule's budget with fresh phones)...
		{At: at, Ops: ops(attempts(take("tries", alg, 1)), take("tight", alg, 1)), Want: want(allowedLeft(5), refused), Ignore: values},
		{At: at, Ops: ops(peek("tries", alg, 5)), Want: want(fresh(alg, at))},
		// ... but charges a key that exists, although the request is
		// refused.
		{At: at, Ops: ops(attempts(take("tries", alg, 1))), Want: want(allowedLeft(4)), Ignore: values},
		{At: at, Ops: ops(attempts(take("tries", alg, 1)), take("tight", alg, 1)), Want: want(allowedLeft(3), refused), Ignore: values},
		{At: at, Ops: ops(peek("tries", alg, 4)), Want: want(refused), Ignore: values},
		{At: at, Ops: ops(peek("tries", alg, 3)), Want: want(allowedLeft(3)), Ignore: values},
		// An add counts whatever the request's fate; a peek never does.
		{At: at, Ops: ops(op("added", alg, rules.OpAdd, 2), peek("peeked", alg, 1), take("tight", alg, 1)),
			Want: want(allowedLeft(3), allowedLeft(5), refused), Ignore: values},
		{At: at, Ops: ops(peek("added", alg, 3), peek("peeked", alg, 5)), Want: want(allowedLeft(3), allowedLeft(5)), Ignore: values},
		// A key whose state has decayed is a new key: an attempts op in a
		// refused request does not make it again.
		{At: later, Ops: ops(take("tight", alg, 5)), Want: want(allowedLeft(0)), Ignore: values},
		{At: later, Ops: ops(attempts(take("tries", alg, 1)), take("tight", alg, 1)), Want: want(allowedLeft(5), refused), Ignore: values},
		{At: later, Ops: ops(peek("tries", alg, 5)), Want: want(fresh(alg, later))},
	}}
}

// withRoomyBudget is c with every op marked Sensitive, failing closed, in a
// key budget of 64 keys (rules.Op.MaxKeys, docs/memory-store.md), from one
// network that may make all 64 (rules.Op.Network, NetworkKeys), which no
// case fills: a budget and a share with room change no decision, and a
// store without budgets ignores the fields.
func withRoomyBudget(c Case) Case {
	c.Name += "/roomy_budget"
	steps := make([]Step, len(c.Steps))
	for i, st := range c.Steps {
		st.Ops = append([]rules.Op(nil), st.Ops...)
		for j := range st.Ops {
			st.Ops[j].Sensitive, st.Ops[j].OnError, st.Ops[j].MaxKeys = true, rules.FailClosed, 64
			st.Ops[j].Network, st.Ops[j].NetworkKeys = 7, 64
		}
		steps[i] = st
	}
	c.Steps = steps
	return c
}

// dryRun: a dry-run op is decided exactly as if it enforced (consuming when
// allowed, not when refused, not when the request is refused), but never
// refuses the request.
func dryRun(alg rules.Algorithm) Case {
	const values = IgnoreResetAfter | IgnoreRetryAfter
	at := ms(100)
	return Case{Name: alg.String() + "/dry_run", Steps: []Step{
		{At: at, Ops: ops(dry(take("shadow", alg, 5))), Want: want(allowedLeft(0)), Ignore: values},
		// The dry-run op would refuse; the enforcing one still passes and
		// consumes.
		{At: at, Ops: ops(take("real", alg, 1), dry(take("shadow", alg, 1))), Want: want(allowedLeft(4), refused), Ignore: values},
		{At: at, Ops: ops(peek("real", alg, 4)), Want: want(allowedLeft(4)), Ignore: values},
		{At: at, Ops: ops(peek("real", alg, 5)), Want: want(refused), Ignore: values},
		// A refused dry-run op does not consume.
		{At: at, Ops: ops(dry(take("partial", alg, 3))), Want: want(allowedLeft(2)), Ignore: values},
		{At: at, Ops: ops(dry(take("partial", alg, 3))), Want: want(refused), Ignore: values},
		{At: at, Ops: ops(peek("partial", alg, 2)), Want: want(allowedLeft(2)), Ignore: values},
		// An allowed dry-run op does not consume when the request is refused.
		{At: at, Ops: ops(take("tight", alg, 5)), Want: want(allowedLeft(0)), Ignore: values},
		{At: at, Ops: ops(dry(take("fresh", alg, 1)), take("tight", alg, 1)), Want: want(allowedLeft(5), refused), Ignore: values},
		{At: at, Ops: ops(peek("fresh", alg, 5)), Want: want(fresh(alg, at))},
	}}
}

// kinds: peek, add, refund and reset at one instant.
func kinds(alg rules.Algorithm) Case {
	const values = IgnoreResetAfter | IgnoreRetryAfter
	at := ms(100)
	return Case{Name: alg.String() + "/peek_add_refund_reset", Steps: []Step{
		{At: at, Ops: ops(peek("k", alg, 1)), Want: want(fresh(alg, at))},
		{At: at, Ops: ops(op("k", alg, rules.OpAdd, 3)), Want: want(allowedLeft(2)), Ignore: values},
		{At: at, Ops: ops(peek("k", alg, 3)), Want: want(refused), Ignore: values},
		// An add that does not fit reports so, and counts all the same.
		{At: at, Ops: ops(op("k", alg, rules.OpAdd, 4)), Want: want(refused), Ignore: values},
		{At: at, Ops: ops(take("k", alg, 1)), Want: want(refused), Ignore: values},
		{At: at, Ops: ops(op("k", alg, rules.OpRefund, 100)), Want: want(fresh(alg, at))},
		{At: at, Ops: ops(take("k", alg, 2)), Want: want(allowedLeft(3)), Ignore: values},
		{At: at, Ops: ops(op("k", alg, rules.OpRefund, 1)), Want: want(allowedLeft(4)), Ignore: values},
		{At: at, Ops: ops(op("k", alg, rules.OpReset, 1)), Want: want(fresh(alg, at))},
		{At: at, Ops: ops(take("k", alg, 5)), Want: want(allowedLeft(0)), Ignore: values},
		// Refund and reset of a key never seen.
		{At: at, Ops: ops(op("new1", alg, rules.OpRefund, 1), op("new2", alg, rules.OpReset, 1)), Want: want(fresh(alg, at), fresh(alg, at))},
	}}
}

// expiry: a key idle for its whole reset time behaves as a fresh one, and
// not a microsecond earlier.
func expiry(alg rules.Algorithm) Case {
	// reset is the time back to full (the key's TTL); window the effective
	// window, the wait for one more unit (t), which can be shorter.
	reset, window := expectOf(alg).reset, expectOf(alg).spent
	return Case{Name: alg.String() + "/expiry", Steps: []Step{
		{At: ms(100), Ops: ops(take("x", alg, 5)), Want: want(rules.Result{Allowed: true, ResetAfter: ms(window)})},
		{At: ms(100 + reset - 0.001), Ops: ops(peek("x", alg, 5)), Want: want(refused), Ignore: IgnoreValues},
		{At: ms(100 + reset), Ops: ops(peek("x", alg, 5)), Want: want(fresh(alg, ms(100+reset)))},
		{At: ms(100+reset) + time.Hour, Ops: ops(take("x", alg, 5)), Want: want(allowedLeft(0)), Ignore: IgnoreResetAfter},
		{At: 48 * time.Hour, Ops: ops(peek("x", alg, 5)), Want: want(fresh(alg, 48*time.Hour))},
	}}
}

// retryAdmitted: the client that retries when RetryAfter says is admitted,
// and not a microsecond earlier; a refusal's ResetAfter (RateLimit's t)
// equals its RetryAfter. Five spent at 100ms, the sixth waits one emission
// interval for the buckets, to the window's end for fixed_window, until
// 5×(1−e) + 1 ≤ 5 in the next window (e = 200ms) for sliding_window, and
// until the five leave for sliding_log.
func retryAdmitted(alg rules.Algorithm) Case {
	wait := expectOf(alg).spent
	return Case{Name: alg.String() + "/retry_after_admits", Steps: []Step{
		{At: ms(100), Ops: ops(take("r", alg, 5)), Want: want(allowedLeft(0)), Ignore: IgnoreResetAfter},
		{At: ms(100), Ops: ops(take("r", alg, 1)), Want: want(rules.Result{ResetAfter: ms(wait), RetryAfter: ms(wait)})},
		{At: ms(100 + wait - 0.001), Ops: ops(take("r", alg, 1)), Want: want(rules.Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)})},
		{At: ms(100 + wait), Ops: ops(take("r", alg, 1)), Want: want(ok), Ignore: IgnoreValues},
	}}
}

// attemptRetryCases: a count = "attempts" op refused while its bucket was
// partly refilled empties it (no debt), so its wait is from there: 200ms,
// not the 50ms the state before the call had left. A retry at 50ms would
// be refused; at 200ms it is admitted.
func attemptRetryCases() []Case {
	var cs []Case
	for _, alg := range []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.LeakyBucket} {
		cs = append(cs, Case{Name: alg.String() + "/attempt_retry_after", Steps: []Step{
			{At: ms(100), Ops: ops(take("a", alg, 5)), Want: want(allowedLeft(0)), Ignore: IgnoreResetAfter},
			{At: ms(250), Ops: ops(attempts(take("a", alg, 1))), Want: want(rules.Result{ResetAfter: ms(200), RetryAfter: ms(200)})},
			{At: ms(449.999), Ops: ops(take("a", alg, 1)), Want: want(rules.Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)})},
			{At: ms(450), Ops: ops(take("a", alg, 1)), Want: want(rules.Result{Allowed: true, ResetAfter: ms(200)})},
		}})
	}
	return cs
}

// slidingWindowReport is the report behind the header fix: a
// sliding_window of 3 per 20s answered t=40 and Retry-After: 22. Three at a
// window's start: one more fits in the next window once 3×(1−e/20s) + 1 ≤ 3,
// at e = 6⅔s, so t is 26⅔s (within w + ⌈w÷limit⌉ = 27s, the most this
// estimate can need). A fourth at 4⅔s waits 22s, and t says the same.
func slidingWindowReport() Case {
	o := func(cost int64) rules.Op {
		x := take("sw", rules.SlidingWindow, cost)
		x.Limit, x.PeriodUS = 3, 20*second
		return x
	}
	const fits = 26_666.667 // ms: 40s − ⌊2×20s/3⌋
	return Case{Name: "sliding_window/retry_after_report", Steps: []Step{
		{At: 0, Ops: ops(o(3)), Want: want(rules.Result{Allowed: true, ResetAfter: ms(fits)})},
		{At: ms(4_666.667), Ops: ops(o(1)), Want: want(rules.Result{ResetAfter: 22 * time.Second, RetryAfter: 22 * time.Second})},
		{At: ms(fits - 0.001), Ops: ops(o(1)), Want: want(rules.Result{ResetAfter: ms(0.001), RetryAfter: ms(0.001)})},
		{At: ms(fits), Ops: ops(o(1)), Want: want(allowedLeft(0)), Ignore: IgnoreResetAfter},
	}}
}

// costOverBurst: a cost the counter can never hold is refused with
// RetryNever and consumes nothing.
func costOverBurst(alg rules.Algorithm) Case {
	return Case{Name: alg.String() + "/cost_over_burst", Steps: []Step{
		{Ops: ops(take("big", alg, 6)), Want: want(rules.Result{RetryAfter: rules.RetryNever, ResetAfter: fresh(alg, 0).ResetAfter})},
		{Ops: ops(peek("big", alg, 5)), Want: want(fresh(alg, 0))},
	}}
}

// clockBackwards: a now earlier than the state's last write (another
// node's clock, a step back) never reads as a fresh allowance.
func clockBackwards(alg rules.Algorithm) Case {
	return Case{Name: alg.String() + "/clock_backwards", Steps: []Step{
		{At: ms(10_500), Ops: ops(take("back", alg, 5)), Want: want(allowedLeft(0)), Ignore: IgnoreResetAfter},
		{At: ms(10_200), Ops: ops(take("back", alg, 1)), Want: want(refused), Ignore: IgnoreValues},
		{At: ms(9_000), Ops: ops(attempts(take("back", alg, 1))), Want: want(refused), Ignore: IgnoreValues},
		{At: -time.Hour, Ops: ops(peek("back", alg, 1)), Want: want(refused), Ignore: IgnoreValues},
		{At: ms(10_500), Ops: ops(peek("back", alg, 1)), Want: want(refused), Ignore: IgnoreValues},
	}}
}

// epochCases: windows start at multiples of the period since the Unix
// epoch, whatever the first request.
func epochCases() []Case {
	minute := func(alg rules.Algorithm, cost int64) rules.Op {
		o := take("m", alg, cost)
		o.Limit, o.PeriodUS = 2, 60*second
		return o
	}
	// Base is 2s past a multiple of 7s: the next boundary is at Base+5s.
	seven := func(cost int64) rules.Op {
		o := take("7", rules.FixedWindow, cost)
		o.Limit, o.PeriodUS = 2, 7*second
		return o
	}
	return []Case{
		{Name: "fixed_window/epoch_aligned", Steps: []Step{
			{At: ms(59_999), Ops: ops(minute(rules.FixedWindow, 2)), Want: want(rules.Result{Allowed: true, ResetAfter: ms(1)})},
			{At: ms(59_999.5), Ops: ops(minute(rules.FixedWindow, 1)), Want: want(rules.Result{ResetAfter: ms(0.5), RetryAfter: ms(0.5)})},
			{At: ms(60_000), Ops: ops(minute(rules.FixedWindow, 1)), Want: want(rules.Result{Allowed: true, Remaining: 1, ResetAfter: time.Minute})},
		}},
		{Name: "fixed_window/epoch_aligned_7s", Steps: []Step{
			{At: ms(4_999.999), Ops: ops(seven(2)), Want: want(rules.Result{Allowed: true, ResetAfter: ms(0.001)})},
			{At: ms(5_000), Ops: ops(seven(1)), Want: want(rules.Result{Allowed: true, Remaining: 1, ResetAfter: 7 * time.Second})},
		}},
		{Name: "sliding_window/epoch_aligned", Steps: []Step{
			// Next window: 2×(60s−e)/60s + 1 ≤ 2 at e = 30s.
			{At: ms(59_999), Ops: ops(minute(rules.SlidingWindow, 2)), Want: want(rules.Result{Allowed: true, ResetAfter: ms(30_001)})},
			{At: ms(60_000), Ops: ops(minute(rules.SlidingWindow, 1)), Want: want(rules.Result{ResetAfter: 30 * time.Second, RetryAfter: 30 * time.Second})},
			// 2×½ + 1 = 2: the one left this window is spent; one more once
			// the previous window is out of the estimate, at 120s.
			{At: ms(90_000), Ops: ops(minute(rules.SlidingWindow, 1)), Want: want(rules.Result{Allowed: true, ResetAfter: 30 * time.Second})},
		}},
	}
}

// algorithmChange: a rule whose algorithm changed across a reload keeps its
// key, and the state another algorithm wrote reads as fresh (rules.State),
// whatever each store keeps per algorithm (redisstore: a sorted set beside
// a sliding_log's key, stale once another algorithm wrote the key).
func algorithmChange() Case {
	const values = IgnoreResetAfter | IgnoreRetryAfter
	at := ms(100)
	step := func(o rules.Op, r rules.Result) Step {
		return Step{At: at, Ops: ops(o), Want: want(r), Ignore: values}
	}
	return Case{Name: "algorithm_change", Steps: []Step{
		step(take("switch", rules.SlidingLog, 5), allowedLeft(0)),
		step(take("switch", rules.FixedWindow, 1), allowedLeft(4)),
		// The log's five timestamps are another algorithm's state now.
		step(take("switch", rules.SlidingLog, 1), allowedLeft(4)),
		step(peek("switch", rules.SlidingLog, 4), allowedLeft(4)),
		step(peek("switch", rules.SlidingLog, 5), refused),
		step(take("switch", rules.GCRA, 2), allowedLeft(3)),
		step(take("switch", rules.TokenBucket, 5), allowedLeft(0)),
		step(take("switch", rules.GCRA, 1), allowedLeft(4)),
		step(take("switch", rules.SlidingWindow, 5), allowedLeft(0)),
		step(take("switch", rules.LeakyBucket, 1), allowedLeft(4)),
		step(take("switch", rules.SlidingLog, 5), allowedLeft(0)),
		step(peek("switch", rules.SlidingLog, 1), refused),
		step(take("switch", rules.FixedWindow, 5), allowedLeft(0)),
	}}
}

// invalidCases: ops no store can apply are an error, never a panic.
func invalidCases() Case {
	zeroLimit := take("bad", rules.GCRA, 1)
	zeroLimit.Limit = 0
	zeroPeriod := take("bad", rules.SlidingWindow, 1)
	zeroPeriod.PeriodUS = 0
	noBurst := take("bad", rules.TokenBucket, 1)
	noBurst.Burst = 0
	negative := take("bad", rules.FixedWindow, -1)
	distinct := take("bad", rules.Distinct, 1)
	distinct.Limit = rules.MaxDistinctLimit + 1
	unknown := take("bad", rules.Distinct+1, 1)
	badKind := op("bad", rules.GCRA, rules.OpReset+1, 1)
	c := Case{Name: "invalid_ops"}
	for _, o := range []rules.Op{zeroLimit, zeroPeriod, noBurst, negative, distinct, unknown, badKind} {
		// A bad op fails the whole call, the good one beside it included,
		// which then must not have consumed.
		c.Steps = append(c.Steps, Step{Ops: ops(take("good", rules.GCRA, 1), o), Err: true})
	}
	c.Steps = append(c.Steps, Step{Ops: ops(peek("good", rules.GCRA, 5)), Want: want(fresh(rules.GCRA, 0))})
	return c
}
