package storetest

import (
	"math"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// The Distinct tables: count_distinct's algorithm (rules.Distinct), 3
// distinct values per second, each op counting one Member; a new Member
// needs Cost free places (at least 1), so that several values of one
// request on one key, judged against the state before the call, never
// fill a set past its limit (behaviour/values). Members are chosen to cover the hex encoding a Redis store gives
// them (0, the top bit, all ones) and the order of members seen at one
// instant (ascending by value in every store).

// member values of the tables; mTop and mAll sort after every small one.
const (
	mTop uint64 = 1 << 63
	mAll uint64 = math.MaxUint64
)

// dop is a Distinct op of kind on key counting member: 3 per second.
func dop(key string, kind rules.OpKind, member uint64) rules.Op {
	return rules.Op{Kind: kind, Algorithm: rules.Distinct, Key: Key(key), Limit: 3, PeriodUS: second, Cost: 1, Member: member, Enforce: true}
}

func dtake(key string, member uint64) rules.Op { return dop(key, rules.OpTake, member) }
func dpeek(key string, member uint64) rules.Op { return dop(key, rules.OpPeek, member) }

// distinctFresh is an empty set's result: all 3 left, and one more new
// value than that fits a period after they are spent.
var distinctFresh = rules.Result{Allowed: true, Remaining: 3, ResetAfter: time.Second}

// refusedFor is a refusal whose RetryAfter (and ResetAfter) is d.
func refusedFor(d time.Duration) rules.Result { return rules.Result{ResetAfter: d, RetryAfter: d} }

// allowedFor is an allowed result with n left and an effective window d.
func allowedFor(n int64, d time.Duration) rules.Result {
	return rules.Result{Allowed: true, Remaining: n, ResetAfter: d}
}

func distinctCases() []Case {
	at := func(v float64, o rules.Op, r rules.Result) Step { return Step{At: ms(v), Ops: ops(o), Want: want(r)} }
	withCost := func(o rules.Op, c int64) rules.Op { o.Cost = c; return o }
	kind := func(k rules.OpKind, m uint64) rules.Op { return dop("v", k, m) }
	const values = IgnoreResetAfter | IgnoreRetryAfter
	return []Case{
		{Name: "distinct/values", Steps: []Step{
			at(0, dpeek("v", 1), distinctFresh),
			// Below the limit a new value is allowed while its cost in
			// places is free (a cost of 0 needs one). The effective window:
			// spent on the values left, one more fits once the oldest
			// expires.
			at(100, dtake("v", 1), allowedFor(2, ms(1000))),
			at(200, withCost(dtake("v", mTop), 2), allowedFor(1, ms(900))),
			// A known value counts nothing new; it is seen again now.
			at(300, dtake("v", 1), allowedFor(1, ms(900))),
			at(400, withCost(dtake("v", mAll), 0), allowedFor(0, ms(800))),
			// Full: a known value is allowed, a new one refused until the
			// oldest (mTop, seen at 200) expires.
			at(500, dtake("v", mAll), allowedFor(0, ms(700))),
			at(500, dtake("v", 0), refusedFor(ms(700))),
			// Neither an attempt nor an add of a new value grows a full set.
			at(600, attempts(dtake("v", 0)), refusedFor(ms(600))),
			at(600, kind(rules.OpAdd, 5), refusedFor(ms(600))),
			at(600, dpeek("v", 0), refusedFor(ms(600))),
			// Expired exactly a period after it was last seen.
			at(1199.999, dtake("v", 0), refusedFor(ms(0.001))),
			at(1200, dtake("v", 0), allowedFor(0, ms(100))),
			// A refund forgets the value; one of a value never seen changes
			// nothing.
			at(1200, kind(rules.OpRefund, mAll), allowedFor(1, ms(100))),
			at(1200, kind(rules.OpRefund, 9), allowedFor(1, ms(100))),
			// An add counts a value whatever the request, up to the limit.
			at(1250, kind(rules.OpAdd, 5), allowedFor(0, ms(50))),
			at(1250, kind(rules.OpReset, 0), distinctFresh),
			at(1250, dtake("v", 5), allowedFor(2, ms(1000))),
			// 5 (seen at 1250) is the key's only member: back to fresh a
			// period later, and not a microsecond earlier.
			at(2249.999, dpeek("v", 6), allowedFor(2, ms(0.001))),
			at(2250, dpeek("v", 6), distinctFresh),
		}},
		{Name: "distinct/places", Steps: []Step{
			// Two values of one request on one key: the second needs two
			// places, one for the first, which the call may add before it.
			{At: ms(100), Ops: ops(dtake("p", 1), withCost(dtake("p", 2), 2)), Want: want(allowedFor(2, ms(1000)), allowedFor(1, ms(1000)))},
			// One place left: two new values are refused together, and
			// neither is counted.
			{At: ms(200), Ops: ops(dtake("p", 3), withCost(dtake("p", 4), 2)), Want: want(allowedFor(1, ms(900)), refusedFor(ms(900)))},
			// Judged as though the first were new: a known value beside a
			// new one is refused too, one place short of the limit.
			{At: ms(200), Ops: ops(dtake("p", 1), withCost(dtake("p", 3), 2)), Want: want(allowedFor(1, ms(900)), refusedFor(ms(900)))},
			// Alone, the new value takes the last place.
			at(200, dtake("p", 3), allowedFor(0, ms(900))),
			// A known value needs no place, whatever its cost.
			{At: ms(300), Ops: ops(dtake("p", 1), withCost(dtake("p", 2), 2)), Want: want(allowedLeft(0), allowedLeft(0)), Ignore: values},
			// More places than the limit never fit.
			at(300, withCost(dtake("q", 1), 4), rules.Result{ResetAfter: time.Second, RetryAfter: rules.RetryNever}),
			at(300, dpeek("q", 1), distinctFresh),
		}},
		{Name: "distinct/all_or_nothing", Steps: []Step{
			at(100, dtake("tight", 1), allowedFor(2, ms(1000))),
			at(200, dtake("tight", 2), allowedFor(1, ms(900))),
			at(200, dtake("tight", 3), allowedFor(0, ms(900))),
			// "roomy" allows on its own, but "tight" refuses a new value.
			{At: ms(300), Ops: ops(dtake("roomy", 1), dtake("tight", 4)), Want: want(allowedFor(3, time.Second), refusedFor(ms(800)))},
			at(300, dpeek("roomy", 1), distinctFresh),
			// A known value, allowed, is not seen again when another op
			// refuses the request: 1 (seen at 100) is still the oldest.
			{At: ms(300), Ops: ops(dtake("tight", 1), never()), Want: want(allowedLeft(0), refused), Ignore: values},
			at(300, dtake("tight", 4), refusedFor(ms(800))),
			// An attempts op in a refused request makes no new key...
			{At: ms(400), Ops: ops(attempts(dtake("tries", 1)), never()), Want: want(allowedLeft(3), refused), Ignore: values},
			at(400, dpeek("tries", 1), distinctFresh),
			// ... but counts on a key that exists, although the request is
			// refused.
			at(400, attempts(dtake("tries", 1)), allowedFor(2, ms(1000))),
			{At: ms(400), Ops: ops(attempts(dtake("tries", 2)), never()), Want: want(allowedLeft(1), refused), Ignore: values},
			at(400, dpeek("tries", 3), allowedFor(1, ms(1000))),
			// An add counts whatever the request's fate; a peek never does.
			{At: ms(400), Ops: ops(dop("added", rules.OpAdd, 1), dpeek("peeked", 1), never()), Want: want(allowedLeft(2), allowedLeft(3), refused), Ignore: values},
			{At: ms(400), Ops: ops(dpeek("added", 2), dpeek("peeked", 2)), Want: want(allowedFor(2, ms(1000)), distinctFresh)},
		}},
		{Name: "distinct/dry_run", Steps: []Step{
			at(100, dry(dtake("shadow", 1)), allowedFor(2, ms(1000))),
			at(100, dry(dtake("shadow", 2)), allowedFor(1, ms(1000))),
			at(100, dry(dtake("shadow", 3)), allowedFor(0, ms(1000))),
			// The dry-run op would refuse; the enforcing one still passes
			// and counts; the refused dry-run value is not counted.
			{At: ms(100), Ops: ops(dtake("real", 1), dry(dtake("shadow", 4))), Want: want(allowedFor(2, ms(1000)), refusedFor(ms(1000)))},
			at(100, dpeek("real", 9), allowedFor(2, ms(1000))),
			at(100, dop("shadow", rules.OpRefund, 3), allowedFor(1, ms(1000))),
			at(100, dpeek("shadow", 4), allowedFor(1, ms(1000))),
			// An allowed dry-run op does not count when the request is
			// refused.
			{At: ms(100), Ops: ops(dry(dtake("fresh", 1)), never()), Want: want(allowedLeft(3), refused), Ignore: values},
			at(100, dpeek("fresh", 1), distinctFresh),
		}},
		{Name: "distinct/clock_backwards", Steps: []Step{
			at(10_500, dtake("back", 1), allowedFor(2, ms(1000))),
			at(10_500, dtake("back", 2), allowedFor(1, ms(1000))),
			at(10_500, dtake("back", 3), allowedFor(0, ms(1000))),
			// Earlier than the members were seen: nothing has expired, a
			// new value is still refused, a known one allowed and seen
			// "again" no earlier than the newest member.
			{At: ms(10_200), Ops: ops(dtake("back", 4)), Want: want(refused), Ignore: IgnoreValues},
			{At: ms(9_000), Ops: ops(attempts(dtake("back", 4))), Want: want(refused), Ignore: IgnoreValues},
			{At: ms(9_000), Ops: ops(dtake("back", 1)), Want: want(allowedLeft(0)), Ignore: IgnoreValues},
			{At: -time.Hour, Ops: ops(dpeek("back", 4)), Want: want(refused), Ignore: IgnoreValues},
			at(10_500, dpeek("back", 4), refusedFor(ms(1000))),
			at(11_499.999, dpeek("back", 4), refusedFor(ms(0.001))),
			at(11_500, dpeek("back", 4), distinctFresh),
		}},
		{Name: "distinct/limit_lowered", Steps: []Step{
			at(100, limit(dop("low", rules.OpAdd, mAll), 4), allowedFor(3, ms(1000))),
			at(100, limit(dop("low", rules.OpAdd, 7), 4), allowedFor(2, ms(1000))),
			at(100, limit(dop("low", rules.OpAdd, mTop), 4), allowedFor(1, ms(1000))),
			at(100, limit(dop("low", rules.OpAdd, 0), 4), allowedFor(0, ms(1000))),
			// A reload lowers the limit to 2: an add of a new value keeps
			// the newest two, ties by value (0 and 7 go), and counts nothing.
			at(200, limit(dop("low", rules.OpAdd, 5), 2), refusedFor(ms(900))),
			at(200, limit(dpeek("low", 7), 2), refusedFor(ms(900))),
			at(200, limit(dpeek("low", mTop), 2), allowedFor(0, ms(900))),
			at(200, limit(dpeek("low", 7), 4), allowedFor(2, ms(900))),
			// A known value over the lowered limit keeps its place.
			at(300, limit(dtake("low", mTop), 1), allowedFor(0, ms(1000))),
			at(300, limit(dpeek("low", 1), 4), allowedFor(3, ms(1000))),
		}},
		{Name: "distinct/algorithm_change", Steps: []Step{
			// A sliding_log and a distinct count of one key: each reads the
			// other's sorted set (a Redis store keeps both in one) as empty.
			{At: ms(100), Ops: ops(take("switch", rules.SlidingLog, 5)), Want: want(allowedLeft(0)), Ignore: values},
			at(100, dtake("switch", 1), allowedFor(2, ms(1000))),
			at(100, dtake("switch", 2), allowedFor(1, ms(1000))),
			at(100, peek("switch", rules.SlidingLog, 5), fresh(rules.SlidingLog, ms(100))),
			{At: ms(100), Ops: ops(take("switch", rules.SlidingLog, 2)), Want: want(allowedLeft(3)), Ignore: values},
			at(100, dpeek("switch", 1), distinctFresh),
			{At: ms(100), Ops: ops(take("switch", rules.GCRA, 1)), Want: want(allowedLeft(4)), Ignore: values},
			at(100, dtake("switch", 3), allowedFor(2, ms(1000))),
			at(100, take("switch", rules.FixedWindow, 5), rules.Result{Allowed: true, ResetAfter: ms(900)}),
			at(100, dpeek("switch", 3), distinctFresh),
		}},
	}
}

// never is an op that refuses every request it is in: a gcra take of
// more than its burst.
func never() rules.Op { return take("never", rules.GCRA, 6) }

// limit is o with its limit set to n (a reload's new limit).
func limit(o rules.Op, n int64) rules.Op { o.Limit = n; return o }
