package gateway

import (
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/behaviour/adaptive"
	"github.com/edge-gateway/edge/rules"
)

// GET /admin/rules (docs/operations.md): every rule of the running policy,
// what it matches, its dry-run state now and its decision counts.
//
//	{"node_dry_run": false, "node_dry_run_until": "",
//	 "rules": [{"name": "login-per-ip", "methods": ["POST"], "paths": ["/login"], "hosts": [],
//	   "key": ["ip"], "algorithm": "gcra", "limit": 5, "period": "1m0s", "sensitive": true,
//	   "action": "limit", "dry_run": true, "dry_run_until": "2026-12-02T01:00:00Z",
//	   "dry_run_reason": "INC-123", "decisions": {"allow": 12, "deny": 3, "dry_run_deny": 1}}]}
//
// node_dry_run is the whole node's dry-run (policy, -dry-run flag or the
// "*" toggle) and node_dry_run_until the "*" toggle's expiry. A rule's
// dry_run is whether it refuses nothing now, for any of those reasons or
// its own dry_run, action = "log" or a toggle; dry_run_until and
// dry_run_reason are its own toggle's. decisions are the rule's
// edge_decisions_total counts since the node started, by decision (the
// admin page turns them into rates), every decision present, 0 if none.
// A concurrency rule's algorithm is "concurrency", its limit the requests
// in flight per key and its period its lease (docs/policy.md,
// "Concurrency limits"); an adaptive rule's limit is its limiter's now on
// this node, its period empty and its adaptive its method and bounds, such
// as "gradient, min 5, max 200" (docs/policy.md, "Adaptive concurrency").

type adminRule struct {
	Name         string           `json:"name"`
	Methods      []string         `json:"methods"`
	Paths        []string         `json:"paths"`
	Hosts        []string         `json:"hosts"`
	Key          []string         `json:"key"`
	Algorithm    string           `json:"algorithm"`
	Limit        int64            `json:"limit"`
	Period       string           `json:"period"`
	Adaptive     string           `json:"adaptive,omitempty"`
	Sensitive    bool             `json:"sensitive"`
	Action       string           `json:"action"`
	DryRun       bool             `json:"dry_run"`
	DryRunUntil  string           `json:"dry_run_until"`
	DryRunReason string           `json:"dry_run_reason"`
	Decisions    map[string]int64 `json:"decisions"`
}

func (s *Server) adminRules(ctx *fasthttp.RequestCtx) {
	st := s.state.Load()
	p, now := st.policy, s.requestTime(ctx)
	out := struct {
		NodeDryRun      bool        `json:"node_dry_run"`
		NodeDryRunUntil string      `json:"node_dry_run_until"`
		Rules           []adminRule `json:"rules"`
	}{NodeDryRun: p.DryRun || s.engine.DryRunAt(now), Rules: make([]adminRule, 0, len(p.Rules))}
	if t, ok := s.engine.DryRuns().Node(now); ok {
		out.NodeDryRunUntil = rfc3339(t.Until)
	}
	for i, r := range p.Rules {
		ar := adminRule{
			Name: r.Name, Methods: nonNil(r.Route.Methods()), Paths: nonNil(r.Route.Paths()), Hosts: nonNil(r.Route.Hosts()),
			Key: nonNil(r.KeyNames), Algorithm: r.AlgorithmName(), Limit: r.Limit, Period: periodText(r),
			Sensitive: r.Sensitive, Action: r.Action.String(),
			DryRun:    r.Action != rules.ActionSkip && !s.engine.RuleEnforces(p, r, now),
			Decisions: map[string]int64{},
		}
		if l := adaptive.LimiterOf(s.engine, r); l != nil {
			a := adaptive.Of(r)
			ar.Limit, ar.Period = l.Limit(), ""
			ar.Adaptive = fmt.Sprintf("%s, min %d, max %d", a.Method, a.Min, a.Max)
		}
		if t, ok := s.engine.DryRuns().Rule(r.Name, now); ok {
			ar.DryRunUntil, ar.DryRunReason = rfc3339(t.Until), t.Reason
		}
		for o, c := range st.counters[i] {
			if c == nil {
				continue
			}
			var m dto.Metric
			if c.Write(&m) == nil {
				ar.Decisions[metricOutcome(rules.Outcome(o))] += int64(m.GetCounter().GetValue())
			}
		}
		out.Rules = append(out.Rules, ar)
	}
	adminJSON(ctx, fasthttp.StatusOK, out)
}

// nonNil makes an absent list [] in JSON, never null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
