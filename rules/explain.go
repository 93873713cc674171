package rules

import (
	"context"
	"time"
)

// Explain decides req at now against p exactly as Check would, through
// the same code, but consumes nothing (POST /admin/explain,
// docs/operations.md): every op of the request's store call, the mint
// budget's and every other RequestHook's included, is sent as an OpPeek
// without Attempts, so the store judges each against its state and
// changes none; no ban is written; and the caller must not call Settle
// (so no known-visitor marker is recorded and no counter is refunded or
// reset). Known-visitor markers and bans are read as Check reads them.
//
// The Decision, s.Matches, s.Ops and s.Res are Check's: a match's
// Result.Remaining is what the counter has left now, before this request
// (a peek takes nothing), and RetryAfter is the wait before a request
// like this one is admitted. Metrics and logs are the caller's to leave
// alone.
func (e *Engine) Explain(ctx context.Context, now time.Time, p *Policy, req *Request, s *Scratch) Decision {
	s.peekOnly = true
	d := e.Check(ctx, now, p, req, s)
	s.peekOnly = false
	for _, a := range p.admitters {
		d = a.ExplainAdmit(s, d) // node-local limits as admission would decide them (load shedding)
	}
	d.Settle = false // nothing was counted: nothing to settle
	return d
}

// peekAll turns every op of the request's store call into a peek that
// charges no attempt: Explain's call judges every op and changes nothing.
func (s *Scratch) peekAll() {
	for i := range s.Ops {
		s.Ops[i].Kind, s.Ops[i].Attempts = OpPeek, false
	}
}

// peekOnly makes op decided as a dry-run peek: it never refuses, never
// consumes.
func peekOnly(op *Op) { op.Kind, op.Enforce, op.Attempts = OpPeek, false, false }
