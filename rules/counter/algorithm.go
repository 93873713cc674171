package counter

import "strings"

// Algorithm names a limit algorithm, as the lesson names them. Its value is
// its id: on the wire (redisstore's op code), in take.lua's port table and
// in every stored state (a memory store's snapshot, a Redis key's string),
// so an id never changes and a new algorithm takes the next one.
type Algorithm uint8

const (
	// GCRA is the generic cell rate algorithm: one theoretical arrival time
	// (TAT) per key, emission interval T = period/limit, tolerance burst×T.
	GCRA Algorithm = iota
	// TokenBucket holds up to Burst tokens refilled at Limit per period.
	TokenBucket
	// LeakyBucket is the meter form: a level that drains at Limit per period
	// and refuses what would overflow Burst. Its decisions equal TokenBucket's.
	LeakyBucket
	// FixedWindow counts per window; windows start at multiples of the period
	// since the Unix epoch (UTC).
	FixedWindow
	// SlidingWindow is the two-counter estimate: the previous window's count
	// weighted by its overlap with the rolling period, plus the current count.
	SlidingWindow
	// SlidingLog keeps the timestamps of allowed requests, at most Limit of
	// them, and is exact: no rolling period ever holds more than Limit.
	SlidingLog
	// Distinct counts distinct Member values per key over a sliding
	// period (count_distinct): it keeps each member seen in the last
	// PeriodUS with the time it was last seen, at most Limit of them
	// (MaxDistinctLimit), and is exact. A live member is always allowed; a
	// new one is allowed while fewer than Limit are live, and refused until
	// the oldest expires otherwise (a full set evicts nothing). Every op
	// counts one member, whatever its Cost: a take or add counts Member
	// now (a new one never past Limit), a refund forgets it, a reset
	// forgets all; Remaining is Limit minus the live members.
	Distinct
	// NumAlgorithms is the number of algorithms: every id is below it.
	NumAlgorithms
)

// table is every algorithm's entry, by id: what the stores read of it.
// With the id above, the algorithm's own file and its case in each of
// steps.go's switches, it is all there is to registering an algorithm.
var table = [NumAlgorithms]algorithm{
	GCRA:          gcra,
	TokenBucket:   tokenBucket,
	LeakyBucket:   leakyBucket,
	FixedWindow:   fixedWindow,
	SlidingWindow: slidingWindow,
	SlidingLog:    slidingLog,
	Distinct:      distinct,
}

// Spec is what the stores, take.lua and the policy compiler read of an
// algorithm, instead of switching on it.
type Spec struct {
	// Name is its name in the policy language (algorithm = "gcra") and in
	// every message. Distinct's, "distinct", names it in messages only.
	Name string
	// Policy reports whether a rule may name it in algorithm = (Distinct
	// is count_distinct's, which selects it).
	Policy bool
	// Lua is the name take.lua gives its id, in the port table
	// (local GCRA, TOKEN, … = 0, 1, …).
	Lua string
	// Burst reports whether it reads Op.Burst (a bucket of Burst units).
	// The others ignore it: a rule may not set burst, and one of them can
	// take at most Limit units at once.
	Burst bool
	// Periods is how many periods its state lasts without debt: a window's
	// count, 1, but sliding_window's 2 (its count weighs in the estimate
	// until the end of the window after its own). A state that reads Burst
	// lasts Burst/Limit periods more (rules.Policy.LongestKeyLifetime).
	Periods int64
	// Set reports whether its State keeps an array (Log or Seen): the Redis
	// store holds it in a sorted set beside the key's string, in the key
	// slot after it.
	Set bool
	// Members reports whether it counts Op.Member values: its decision
	// depends on the member, not on the key alone. One request may then
	// send several ops on one key (behaviour/values), the Redis store sends
	// each op's Member, and a key-secret rotation does not carry a twin's
	// state over (its members are hashes under the previous secret).
	Members bool
	// FastPath reports whether take.lua's fast path runs it (an algorithm
	// of the string key alone); every other runs in the script's port
	// only, as does a calendar window (redisstore's needsPort).
	FastPath bool
}

// Spec returns a's table entry; the zero Spec, Name "unknown", for an id
// past the last.
func (a Algorithm) Spec() Spec {
	if a < NumAlgorithms {
		return table[a].Spec
	}
	return Spec{Name: "unknown"}
}

// String returns the algorithm's policy name, such as "sliding_window".
func (a Algorithm) String() string { return a.Spec().Name }

// Algorithms returns every algorithm, by id.
func Algorithms() []Algorithm {
	all := make([]Algorithm, NumAlgorithms)
	for i := range all {
		all[i] = Algorithm(i)
	}
	return all
}

// Parse returns the Algorithm a policy names (a Spec.Policy one); ok is
// false for any other name. "distinct" is not a policy name
// (count_distinct selects it).
func Parse(name string) (a Algorithm, ok bool) {
	for i := range table {
		if s := &table[i].Spec; s.Policy && s.Name == name {
			return Algorithm(i), true
		}
	}
	return 0, false
}

// PolicyNames returns the names a rule's algorithm = may give, by id.
func PolicyNames() []string {
	var out []string
	for i := range table {
		if table[i].Policy {
			out = append(out, table[i].Name)
		}
	}
	return out
}

// BurstNames names the policy algorithms that read burst (Spec.Burst), as
// a sentence says them: "gcra, token_bucket and leaky_bucket".
func BurstNames() string {
	var names []string
	for i := range table {
		if table[i].Policy && table[i].Burst {
			names = append(names, table[i].Name)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// algorithm is one table entry: its Spec and its limits, the parameters
// it checks beyond those every algorithm shares (ValidateLimits; nil when
// there are none; name is Spec.Name). Its steps (wait, window, report and
// consume, in its file) are dispatched by a switch each in steps.go, not
// through the table: called through a function value, the state and the op
// they take a pointer to would escape to the heap, and the decision path
// allocates nothing. TestEveryAlgorithmIsDispatched holds the switches to
// the table.
type algorithm struct {
	Spec
	limits func(name string, limit, burst, periodUS int64) error
}
