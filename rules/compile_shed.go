package rules

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Load shedding's policy language (docs/policy.md, "Load shedding"): the
// edge block's load_shedding { } and the rules' priority attribute.

// LoadSheddingBlock is `edge { load_shedding { } }`, decoded with the edge
// block (package node) and compiled here (Compiler.LoadShedding).
type LoadSheddingBlock struct {
	// max_in_flight is the node's ceiling on the requests it has at the
	// origin; optional (without it only adaptive rules shed).
	MaxInFlight *int64 `hcl:"max_in_flight,optional"`
	// shed_at is each priority's share of a capacity, an object of
	// percentages: { low = "50%", normal = "75%", high = "90%" }.
	ShedAt hcl.Expression `hcl:"shed_at,optional"`
	// retry_after is the Retry-After of a shed request on an ordinary
	// route (default "1s").
	RetryAfter *string `hcl:"retry_after,optional"`
	// retry_after_jitter spreads it, as a rule's retry_after_jitter does.
	RetryAfterJitter *string `hcl:"retry_after_jitter,optional"`

	DefRange              hcl.Range `hcl:",def_range"`
	MaxInFlightRange      hcl.Range `hcl:"max_in_flight,attr_value_range"`
	RetryAfterRange       hcl.Range `hcl:"retry_after,attr_value_range"`
	RetryAfterJitterRange hcl.Range `hcl:"retry_after_jitter,attr_value_range"`
}

// MaxShedRetryAfter bounds load_shedding retry_after: a shed is a moment's
// overload, not a budget running out.
const MaxShedRetryAfter = time.Hour

// shedAttrs are the rule attributes of load shedding (newRegistry
// registers them with the features' attributes).
var shedAttrs = []RuleAttrType{
	{Name: "priority", Compile: compilePriority},
}

// compilePriority compiles priority = "low" | "normal" | "high" |
// "critical".
func compilePriority(c *Compiler, r *Rule, attr *hcl.Attribute) {
	s, ok := c.AttrString(attr, `"high"`)
	if !ok {
		return
	}
	p, ok := ParsePriority(s)
	if !ok {
		names := priorityNames[1:]
		c.Errorf(attr.Expr.Range(), "Invalid priority", "%q is not a priority; want one of %q, %q, %q or %q.%s", s, names[0], names[1], names[2], names[3], suggest(s, names))
		return
	}
	if r.Action == ActionSkip {
		c.Errorf(attr.NameRange, "Invalid priority", "rule %q is a skip rule: it takes other rules out of a request and has no priority of its own; remove priority", r.Name)
		return
	}
	r.Priority = p
}

// LoadShedding compiles the edge block's load_shedding { } (nil: none)
// into Policy.Shedding. The node's edge decode calls it (package node).
func (c *Compiler) LoadShedding(b *LoadSheddingBlock) {
	ls := &c.p.Shedding
	if b == nil {
		return
	}
	ls.On = true
	ls.Share = defaultShedShares
	ls.RetryAfter = DefaultShedRetryAfter
	ls.rng = b.DefRange
	if b.MaxInFlight != nil {
		n := *b.MaxInFlight
		if n < 1 || n > MaxInFlightLimit {
			c.Errorf(b.MaxInFlightRange, "Invalid max_in_flight", "max_in_flight is the node's requests at the origin, from 1 to %d, got %d", MaxInFlightLimit, n)
		} else {
			ls.MaxInFlight = n
		}
	}
	c.shedAt(b.ShedAt, ls)
	if b.RetryAfter != nil {
		d, err := time.ParseDuration(*b.RetryAfter)
		switch {
		case err != nil || d <= 0:
			c.Errorf(b.RetryAfterRange, "Invalid retry_after", "retry_after %q must be a positive Go duration, such as \"1s\"", *b.RetryAfter)
		case d > MaxShedRetryAfter:
			c.Errorf(b.RetryAfterRange, "Invalid retry_after", "retry_after %q is over %s: a shed request is turned away for a moment's overload", *b.RetryAfter, MaxShedRetryAfter)
		default:
			ls.RetryAfter = d
		}
	}
	if b.RetryAfterJitter != nil {
		f, ok := parsePercent(*b.RetryAfterJitter)
		if !ok || f > 100 {
			c.Errorf(b.RetryAfterJitterRange, "Invalid retry_after_jitter", "retry_after_jitter %q must be a percentage from 0%% to 100%%, such as \"50%%\"", *b.RetryAfterJitter)
		} else {
			ls.Jitter = f / 100
			if ls.Jitter > 0 && int64(ls.Jitter*ls.RetryAfter.Seconds()) == 0 {
				c.Warnf(b.RetryAfterJitterRange, "retry_after_jitter spreads nothing",
					"retry_after_jitter %q of retry_after %v is under a second, and Retry-After is whole seconds: no shed answer is ever spread. Raise retry_after (\"2s\" with \"50%%\" spreads over 2 and 3 seconds) or the jitter", *b.RetryAfterJitter, ls.RetryAfter)
			}
		}
	}
}

// shedAt compiles shed_at into ls.Share: low, normal and high, each a
// percentage over 0% and at most 100%, in that order or equal (a higher
// priority is never shed before a lower one); critical only "100%".
func (c *Compiler) shedAt(expr hcl.Expression, ls *LoadShedding) {
	if expr == nil {
		return
	}
	if v, d := expr.Value(nil); !d.HasErrors() && v.IsNull() {
		return // not written
	}
	pairs, diags := hcl.ExprMap(expr)
	if diags.HasErrors() {
		c.Errorf(expr.Range(), "Invalid shed_at", "shed_at must be an object of percentages by priority, such as { low = \"50%%\", normal = \"75%%\", high = \"90%%\" }")
		return
	}
	names := []string{"low", "normal", "high", "critical"}
	for _, kv := range pairs {
		name := hcl.ExprAsKeyword(kv.Key)
		if name == "" {
			if v, d := kv.Key.Value(nil); !d.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type().FriendlyName() == "string" {
				name = v.AsString()
			}
		}
		p, ok := ParsePriority(name)
		if !ok {
			c.Errorf(kv.Key.Range(), "Invalid shed_at", "%q is not a priority; shed_at takes low, normal and high (and critical, only \"100%%\").%s", name, suggest(name, names))
			continue
		}
		s, ok := exprString(kv.Value)
		f, fok := parsePercent(s)
		switch {
		case !ok || !fok || f <= 0 || f > 100:
			c.Errorf(kv.Value.Range(), "Invalid shed_at", "shed_at's %s must be a percentage over 0%% and at most 100%%, such as \"75%%\"", name)
		case p == PriorityCritical && f != 100:
			c.Errorf(kv.Value.Range(), "Invalid shed_at", "critical is shed only at the capacity itself (100%%): it is the priority kept working while everything else is shed")
		default:
			ls.Share[p] = int64(math.Round(f * 10))
		}
	}
	if ls.Share[PriorityLow] > ls.Share[PriorityNormal] || ls.Share[PriorityNormal] > ls.Share[PriorityHigh] {
		c.Errorf(expr.Range(), "Invalid shed_at", "shed_at must not shed a higher priority before a lower one: low (%s) ≤ normal (%s) ≤ high (%s)", perMilleString(ls.Share[PriorityLow]), perMilleString(ls.Share[PriorityNormal]), perMilleString(ls.Share[PriorityHigh]))
	}
}

// exprString evaluates a string expression.
func exprString(expr hcl.Expression) (string, bool) {
	v, d := expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type().FriendlyName() != "string" {
		return "", false
	}
	return v.AsString(), true
}

// parsePercent parses "75%" or "12.5%" to 75 or 12.5.
func parsePercent(s string) (float64, bool) {
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !pct || err != nil || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	return f, true
}

// perMilleString writes a share per mille as a percentage.
func perMilleString(n int64) string {
	return strconv.FormatFloat(float64(n)/10, 'f', -1, 64) + "%"
}

// finishShed completes load shedding once every rule is compiled: the
// shares and ceilings Check reads, and warnings for settings that shed
// nothing.
func (c *Compiler) finishShed(p *Policy) {
	ls := &p.Shedding
	ls.finish(p)
	if !ls.On {
		for _, r := range p.Rules {
			if r.Priority == PriorityUnset {
				continue
			}
			c.Warnf(r.DefRange, "priority without load_shedding", "priority only orders load shedding, which this policy does not set up: add load_shedding { } to the edge block (with max_in_flight, or an adaptive rule), or remove priority (docs/policy.md, \"Load shedding\")")
		}
		return
	}
	if ls.MaxInFlight == 0 && !ls.local {
		c.Warnf(ls.rng, "load_shedding sheds nothing", "load_shedding has no max_in_flight and no rule is adaptive: no request is ever shed (docs/policy.md, \"Load shedding\")")
	}
	if p.DecideListen != "" && p.sheds() {
		c.Warnf(ls.rng, "load_shedding under decide_listen", "the decision-only listener never sees the origin's answer: a described request is shed when this node's own in-flight counts are at its priority's share, but it holds no slot once answered (docs/deploying.md, \"Decision-only mode\")")
	}
}
