package rules

import (
	"context"
	"errors"
	"time"

	"github.com/edge-gateway/edge/rules/counter"
)

// A store's op, its key and its result are package counter's, with the
// algorithms that decide them (rules/counter), and named here as well:
// policy code writes rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, …}.
type (
	// Key identifies one counter (counter.Key): the rule's ID, a tag byte
	// and a keyed hash of the characteristic values (internal/keyhash).
	Key = counter.Key
	// Op is one counter operation of a request (counter.Op). The Engine
	// builds one per matching rule and hands all of a request's to the
	// Store in one call.
	Op = counter.Op
	// Result is the outcome of one Op (counter.Result).
	Result = counter.Result
	// OpKind says what an Op does to its counter (counter.OpKind).
	OpKind = counter.OpKind
)

// The op kinds (counter.OpTake and the others).
const (
	OpTake   = counter.OpTake
	OpPeek   = counter.OpPeek
	OpAdd    = counter.OpAdd
	OpRefund = counter.OpRefund
	OpReset  = counter.OpReset
)

// Algorithm names a limit algorithm (counter.Algorithm); its Spec is its
// entry in counter's table.
type Algorithm = counter.Algorithm

// The algorithms (counter.GCRA and the others).
const (
	GCRA          = counter.GCRA
	TokenBucket   = counter.TokenBucket
	LeakyBucket   = counter.LeakyBucket
	FixedWindow   = counter.FixedWindow
	SlidingWindow = counter.SlidingWindow
	SlidingLog    = counter.SlidingLog
	Distinct      = counter.Distinct
)

// State is the stored state of one key (counter.State); Seen is one member
// of a Distinct state (counter.Seen).
type (
	State = counter.State
	Seen  = counter.Seen
)

// RetryNever is the RetryAfter of a refused op whose Cost exceeds what the
// counter can ever hold (counter.RetryNever).
const RetryNever = counter.RetryNever

// ErrInvalidLimits wraps the errors of ValidateOp about parameters out of
// bounds (counter.ErrInvalidLimits).
var ErrInvalidLimits = counter.ErrInvalidLimits

// Store applies a request's ops at now in one call and fills res[i] for
// ops[i]; len(res) must equal len(ops). The caller owns both slices, so the
// memory path allocates nothing.
//
// The decision of one call, every implementation alike (rules/storetest
// fixes it with tables):
//   - Each op's Allowed is computed against the state before the call. Keys
//     within one call are distinct (the Engine guarantees it).
//   - The request is refused when any OpTake with Enforce set is not
//     Allowed. All-or-nothing (docs/architecture.md, "The store contract"; the lesson's "rejected requests
//     don't count"): then no OpTake consumes, except Attempts ops.
//   - An OpTake consumes Cost when the request is not refused and the op is
//     Allowed; a dry-run op (Enforce false) that is not Allowed does not
//     consume, exactly as if it enforced. An OpTake with Attempts consumes
//     always, refused or not (count = "attempts"), except that in a refused
//     call it makes no new key: it charges a key whose state is live and
//     leaves a missing or decayed one fresh, so that a client refused by one
//     limit cannot fill an attempts rule's budget with new keys; when over
//     its limit it leaves the counter full (a bucket's TAT at now +
//     burst×T, a log's newest Limit timestamps) rather than running up
//     debt.
//   - OpPeek never consumes; OpAdd always consumes; OpRefund and OpReset
//     always apply and report Allowed.
//   - Remaining and ResetAfter describe the state after the call.
//
// A non-nil error means the store could not decide (unreachable, timed out,
// malformed reply); res is then undefined and the caller applies each
// rule's on_store_error. Implementations are safe for concurrent use.
type Store interface {
	Take(ctx context.Context, now time.Time, ops []Op, res []Result) error
	Close() error
}

// ErrLenMismatch is CheckTake's error when len(res) != len(ops): a caller's
// bug, found before anything is applied. It is preallocated: Take's errors
// never allocate.
var ErrLenMismatch = errors.New("rules: len(res) != len(ops)")

// CheckTake is the check every Store.Take makes before it applies or sends
// anything: ErrLenMismatch when len(res) != len(ops), else the first op's
// counter.ValidateOp error (which wraps ErrInvalidLimits), else nil. It does not
// allocate.
func CheckTake(ops []Op, res []Result) error {
	if len(res) != len(ops) {
		return ErrLenMismatch
	}
	for i := range ops {
		if err := counter.ValidateOp(&ops[i]); err != nil {
			return err
		}
	}
	return nil
}

// DurationUS returns us microseconds (the unit of the algorithms, of
// Op.PeriodUS and of the Redis script's replies) as a time.Duration.
func DurationUS(us int64) time.Duration { return counter.DurationUS(us) }

// The bounds of the algorithms' parameters that rules' compiler names
// (counter's; ValidateLimits keeps every other).
const (
	MaxPeriodUS      = counter.MaxPeriodUS
	MaxDistinctLimit = counter.MaxDistinctLimit
)

// Check decides op against st at nowUS without changing st, the first pass
// of a Store's call (counter.Check).
func Check(st *State, nowUS int64, op *Op) Result { return counter.Check(st, nowUS, op) }

// Settle finishes op once every op of the call is decided, the second pass
// (counter.Settle): it consumes per the contract, fills r from the state
// after the call and returns the TTL in µs to store st with (0: empty).
func Settle(st *State, nowUS int64, op *Op, refused bool, r *Result) (ttlUS int64) {
	return counter.Settle(st, nowUS, op, refused, r)
}

// Refused reports whether a request whose ops were decided into res is
// refused: some OpTake with Enforce set is not Allowed (counter.Refused).
func Refused(ops []Op, res []Result) bool { return counter.Refused(ops, res) }

// Consumes reports whether op changes its counter, given its own decision
// (allowed) and the request's (refused), as Store's contract says
// (counter.Consumes).
func Consumes(op *Op, allowed, refused bool) bool { return counter.Consumes(op, allowed, refused) }
