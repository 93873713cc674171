package shed

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/hclattr"
)

// Feature returns load shedding: priority on rule { }, and the edge
// block's load_shedding { } with its admission (compiled once the rules
// are).
func Feature() rules.Feature {
	return rules.Feature{
		Name:       "shed",
		RuleAttrs:  []rules.RuleAttrType{{Name: "priority", Compile: compilePriority}},
		PolicyDone: done,
	}
}

// MaxInFlightLimit bounds load_shedding max_in_flight.
const MaxInFlightLimit = 1 << 24

// MaxShedRetryAfter bounds load_shedding retry_after: a shed is a moment's
// overload, not a budget running out.
const MaxShedRetryAfter = time.Hour

// DefaultRetryAfter is load_shedding's default retry_after: the
// Retry-After of a request shed on an ordinary route.
const DefaultRetryAfter = time.Second

// perMille is a share of 100%.
const perMille = 1000

// defaultShares are shed_at's defaults, per mille by priority (unset,
// low, normal, high, critical).
var defaultShares = [NumPriorities]int64{0, 500, 750, 900, perMille}

// Settings is the edge block's load_shedding { } as compiled. Its zero
// value, a policy's without the block, sheds only at an adaptive rule's
// limit itself, whatever the priority.
type Settings struct {
	// On is set when the block is written: the priorities then share the
	// capacities as Share says.
	On bool
	// MaxInFlight is the node's ceiling on the requests it has at the
	// origin (forwarded and not yet answered, or held by a queue); 0: none.
	MaxInFlight int64
	// Share is each priority's share of a capacity, per mille (shed_at),
	// as written or by default (defaultShares); admission's own copy has
	// critical's and unset's (Shedding).
	Share [NumPriorities]int64
	// RetryAfter is the Retry-After of a request shed on an ordinary route
	// (default DefaultRetryAfter); a sensitive route's 503 is bare.
	RetryAfter time.Duration
	// Jitter is retry_after_jitter as a fraction, 0 to 1: the gateway adds
	// a uniformly random extra of up to Jitter × RetryAfter, in whole
	// seconds, never less (docs/headers.md, "Retry-After jitter").
	Jitter float64

	rng hcl.Range  // where the block is written, for diagnostics
	adm *admission // what admission reads (admit.go)
}

// Of returns p's load_shedding { } as compiled; a policy without the
// block, or loaded without Feature, has the zero Settings. The caller must
// not modify it.
func Of(p *rules.Policy) *Settings {
	if st, _ := p.Value("shed").(*Settings); st != nil {
		return st
	}
	return &Settings{}
}

// Jitter returns p's load_shedding retry_after_jitter as a fraction (0 to
// 1), 0 without one.
func Jitter(p *rules.Policy) float64 {
	if st, _ := p.Value("shed").(*Settings); st != nil {
		return st.Jitter
	}
	return 0
}

// priorityWords are the priorities a rule may set, in order.
var priorityWords = priorityNames[PriorityLow:]

// priorities are the priorities the rules of a compile set (compile
// state), which done hands admission by rule index.
func priorities(c *rules.Compiler) map[*rules.Rule]Priority {
	return c.State("shed.priorities", func() any { return map[*rules.Rule]Priority{} }).(map[*rules.Rule]Priority)
}

// compilePriority compiles priority = "low" | "normal" | "high" |
// "critical".
func compilePriority(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	s, diags := hclattr.String(attr, `"high"`)
	if !c.Append(diags) {
		return
	}
	p, ok := ParsePriority(s)
	if !ok {
		names := priorityWords
		c.Errorf(attr.Expr.Range(), "Invalid priority", "%q is not a priority; want one of %q, %q, %q or %q.%s", s, names[0], names[1], names[2], names[3], hclattr.Suggest(s, names))
		return
	}
	if r.Action == rules.ActionSkip {
		c.Errorf(attr.NameRange, "Invalid priority", "rule %q is a skip rule: it takes other rules out of a request and has no priority of its own; remove priority", r.Name)
		return
	}
	priorities(c)[r] = p
}

// done compiles the edge block's load_shedding { }, once every rule is:
// the Settings Of returns, the admission that reads them (admit.go: an
// Admitter when the policy sheds), and warnings for settings that shed
// nothing.
func done(c *rules.Compiler) {
	st := &Settings{}
	sh := DefaultShedding()
	if b := node.Of(c.Policy()).LoadShedding; b != nil {
		st.compile(c, b)
		sh = Shedding{MaxInFlight: st.MaxInFlight, Share: st.Share, RetryAfter: st.RetryAfter}
	}
	st.adm = newAdmission(c, sh, priorities(c))
	c.SetValue("shed", st)
	st.warn(c)
}

// compile compiles load_shedding { } b into st.
func (st *Settings) compile(c *rules.Compiler, b *node.LoadSheddingBlock) {
	st.On = true
	st.Share = defaultShares
	st.RetryAfter = DefaultRetryAfter
	st.rng = b.DefRange
	if b.MaxInFlight != nil {
		n := *b.MaxInFlight
		if n < 1 || n > MaxInFlightLimit {
			c.Errorf(b.MaxInFlightRange, "Invalid max_in_flight", "max_in_flight is the node's requests at the origin, from 1 to %d, got %d", MaxInFlightLimit, n)
		} else {
			st.MaxInFlight = n
		}
	}
	st.shedAt(c, b.ShedAt)
	if b.RetryAfter != nil {
		d, err := time.ParseDuration(*b.RetryAfter)
		switch {
		case err != nil || d <= 0:
			c.Errorf(b.RetryAfterRange, "Invalid retry_after", "retry_after %q must be a positive Go duration, such as \"1s\"", *b.RetryAfter)
		case d > MaxShedRetryAfter:
			c.Errorf(b.RetryAfterRange, "Invalid retry_after", "retry_after %q is over %s: a shed request is turned away for a moment's overload", *b.RetryAfter, MaxShedRetryAfter)
		default:
			st.RetryAfter = d
		}
	}
	if b.RetryAfterJitter != nil {
		f, ok := parsePercent(*b.RetryAfterJitter)
		if !ok || f > 100 {
			c.Errorf(b.RetryAfterJitterRange, "Invalid retry_after_jitter", "retry_after_jitter %q must be a percentage from 0%% to 100%%, such as \"50%%\"", *b.RetryAfterJitter)
		} else {
			st.Jitter = f / 100
			if st.Jitter > 0 && int64(st.Jitter*st.RetryAfter.Seconds()) == 0 {
				c.Warnf(b.RetryAfterJitterRange, "retry_after_jitter spreads nothing",
					"retry_after_jitter %q of retry_after %v is under a second, and Retry-After is whole seconds: no shed answer is ever spread. Raise retry_after (\"2s\" with \"50%%\" spreads over 2 and 3 seconds) or the jitter", *b.RetryAfterJitter, st.RetryAfter)
			}
		}
	}
}

// shedAt compiles shed_at into st.Share: low, normal and high, each a
// percentage over 0% and at most 100%, in that order or equal (a higher
// priority is never shed before a lower one); critical only "100%".
func (st *Settings) shedAt(c *rules.Compiler, expr hcl.Expression) {
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
	for _, kv := range pairs {
		name := hcl.ExprAsKeyword(kv.Key)
		if name == "" {
			if v, d := kv.Key.Value(nil); !d.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type().FriendlyName() == "string" {
				name = v.AsString()
			}
		}
		p, ok := ParsePriority(name)
		if !ok {
			c.Errorf(kv.Key.Range(), "Invalid shed_at", "%q is not a priority; shed_at takes low, normal and high (and critical, only \"100%%\").%s", name, hclattr.Suggest(name, priorityWords))
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
			st.Share[p] = int64(math.Round(f * 10))
		}
	}
	low, normal, high := st.Share[PriorityLow], st.Share[PriorityNormal], st.Share[PriorityHigh]
	if low > normal || normal > high {
		c.Errorf(expr.Range(), "Invalid shed_at", "shed_at must not shed a higher priority before a lower one: low (%s) ≤ normal (%s) ≤ high (%s)", perMilleString(low), perMilleString(normal), perMilleString(high))
	}
}

// warn warns, once every rule is compiled, of settings that shed nothing:
// a priority without load_shedding, a block with no ceiling and no
// adaptive rule, and shedding on the decision-only listener.
func (st *Settings) warn(c *rules.Compiler) {
	p := c.Policy()
	if !st.On {
		for _, r := range p.Rules {
			if priorities(c)[r] == PriorityUnset {
				continue
			}
			c.Warnf(r.DefRange, "priority without load_shedding", "priority only orders load shedding, which this policy does not set up: add load_shedding { } to the edge block (with max_in_flight, or an adaptive rule), or remove priority (docs/policy.md, \"Load shedding\")")
		}
		return
	}
	adaptive := false
	for _, r := range p.Rules {
		adaptive = adaptive || r.LocalLimit() != nil // adaptive { } (behaviour/adaptive)
	}
	if st.MaxInFlight == 0 && !adaptive {
		c.Warnf(st.rng, "load_shedding sheds nothing", "load_shedding has no max_in_flight and no rule is adaptive: no request is ever shed (docs/policy.md, \"Load shedding\")")
	}
	if p.DecideListen != "" && (st.MaxInFlight > 0 || adaptive) {
		c.Warnf(st.rng, "load_shedding under decide_listen", "the decision-only listener never sees the origin's answer: a described request is shed when this node's own in-flight counts are at its priority's share, but it holds no slot once answered (docs/deploying.md, \"Decision-only mode\")")
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
