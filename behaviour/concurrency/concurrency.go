package concurrency

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// Feature returns the concurrency limit: algorithm = "concurrency" and
// lease on rule { }.
func Feature() rules.Feature {
	return rules.Feature{
		Name:       "concurrency",
		Algorithms: []rules.AlgorithmType{{Name: Algorithm, Compile: compileAlgorithm}},
		RuleAttrs:  []rules.RuleAttrType{{Name: "lease", Compile: compileLease}},
		RuleDone:   finish,
	}
}

const (
	// Algorithm is the algorithm name of a concurrency rule.
	Algorithm = "concurrency"
	// DefaultLease is a concurrency rule's default lease: how long a
	// request's slot is held at most when nobody gives it back.
	DefaultLease = 30 * time.Second
	// RetryAfter is the Retry-After of a request a concurrency rule
	// refused. A slot frees when any request in flight is answered, which
	// no counter can predict (the store's own wait, until the oldest lease
	// ends, is the worst case, up to the whole lease): one second is the
	// shortest wait Retry-After can say (RFC 9110 §10.2.3).
	RetryAfter = time.Second
)

// Stage is a concurrency rule's: its lease, and the lease IDs it hands
// out. An adaptive rule (behaviour/adaptive) has one too, with no lease:
// it makes no op.
type Stage struct {
	// Lease is the rule's lease (its Period), 0 for an adaptive rule.
	Lease time.Duration

	// lease is the lease attribute as written, at leaseAt (nil: not
	// written), until finish compiles it.
	lease   string
	leaseAt *hcl.Range
	// base and n make lease IDs: a random 64-bit base per Stage (so that
	// two nodes sharing a store, or two policies of one, never hand out
	// the same) plus a counter, which takes no lock and allocates nothing.
	// 2^64 IDs pass before one repeats.
	base uint64
	n    atomic.Uint64
}

// newStage returns a Stage with its lease IDs' base drawn.
func newStage() *Stage {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails (Go 1.24)
	return &Stage{base: binary.LittleEndian.Uint64(b[:])}
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "concurrency" }

// Of returns r's Stage, nil when r is not a concurrency rule.
func Of(r *rules.Rule) *Stage {
	st, _ := rules.StageOf[*Stage](r)
	return st
}

// Lease returns r's lease: 0 when r is not a concurrency rule or is an
// adaptive one.
func Lease(r *rules.Rule) time.Duration {
	if st := Of(r); st != nil {
		return st.Lease
	}
	return 0
}

// Shape gives m's op its lease ID, the request's own: the member it is
// counted as in the key's set of requests in flight. A further value of
// an identity with several (Match.Value > 0) keeps the first's, which the
// Engine passes on, so that the request is one lease on every key.
func (st *Stage) Shape(_ *rules.Request, s *rules.Scratch, m *rules.Match) {
	if m.Value == 0 {
		s.Ops[m.Op].Member = st.base + st.n.Add(1)
	}
}

// Answered runs once the main store call returned. A refusal's wait, in
// s.Res so that every reader agrees, is RetryAfter rather than the
// store's (until the oldest lease ends). The lease is held when an op
// consumed as the store's contract says (an allowed take consumes only
// when no enforcing take refused the request; a dry-run one that is
// allowed consumes too). What the store may hold without the edge knowing
// is given back at once, in the after call: every take when the call
// failed, else those a failure-handling store answered from their
// on_store_error and refused. A call that timed out after Redis ran its
// script took the lease, and nothing else would give it back before the
// lease ends; refunding one never taken changes nothing (a Distinct
// refund forgets a member that is not there), so the refund is safe.
func (st *Stage) Answered(s *rules.Scratch, m *rules.Match, failed bool) (holds bool) {
	for _, j := range [2]int{m.Op, m.CeilingOp} {
		if j < 0 {
			continue
		}
		op := &s.Ops[j]
		if failed {
			if op.Kind == rules.OpTake {
				s.AfterOp(refund(*op))
			}
			continue
		}
		res := &s.Res[j]
		if !res.Allowed && res.RetryAfter > 0 {
			res.RetryAfter, res.ResetAfter = RetryAfter, RetryAfter
		}
		if op.Kind != rules.OpTake {
			continue
		}
		if res.StoreError && !res.Allowed {
			s.AfterOp(refund(*op))
		}
		holds = holds || rules.Consumes(op, res.Allowed, rules.Refused(s.Ops, s.Res))
	}
	return holds
}

// GiveBack appends the refund of each lease m holds: its op and its
// ip_ceiling op, each a take the store allowed (one the request held,
// since it was not refused by the store).
func (st *Stage) GiveBack(s *rules.Scratch, m *rules.Match, ops []rules.Op) []rules.Op {
	for _, j := range [2]int{m.Op, m.CeilingOp} {
		if j >= 0 && j < len(s.Res) && s.Ops[j].Kind == rules.OpTake && s.Res[j].Allowed {
			ops = append(ops, refund(s.Ops[j]))
		}
	}
	return ops
}

// refund is the op that gives op's lease back.
func refund(op rules.Op) rules.Op {
	op.Kind = rules.OpRefund
	return op
}

var (
	_ rules.Shaper = (*Stage)(nil)
	_ rules.Holder = (*Stage)(nil)
)
