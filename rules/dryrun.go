package rules

import (
	"time"

	"github.com/edge-gateway/edge/internal/dryrun"
)

// DryRuns returns the node's run-time dry-run toggles (POST /admin/dry-run;
// internal/dryrun, docs/operations.md "Dry-run toggles"), which Check reads
// on every request. A toggle only turns dry-run on, never off where the
// policy's dry_run or the -dry-run flag put it.
func (e *Engine) DryRuns() *dryrun.Toggles { return &e.dry }

// DryRunAt reports whether the whole node is in dry-run at now, by the
// -dry-run flag (SetDryRun) or the node-wide toggle; the policy's own
// dry_run is the caller's to add (Policy.DryRun).
func (e *Engine) DryRunAt(now time.Time) bool {
	return e.dryRun.Load() || e.dry.Load().NodeOn(now)
}

// RuleEnforces reports whether r refuses at now under p: false when the
// rule, the policy, the flag or a toggle puts it in dry-run, or its action
// is "log". It is the Enforce of r's match in Check.
func (e *Engine) RuleEnforces(p *Policy, r *Rule, now time.Time) bool {
	return !(p.DryRun || e.DryRunAt(now) || r.DryRun || r.Action == ActionLog || e.dry.Load().RuleOn(r.Name, now))
}
