package rules

import (
	"math/big"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// Weighted costs (docs/policy.md, "cost"): a rule's request takes Cost
// units instead of one, a constant or a request header's value clamped to
// 1..max_cost, and settle_from names a response header in which the origin
// says what the request really cost; the difference is charged (OpAdd, into
// debt) or refunded (OpRefund) on the rule's key once the origin has
// answered, in the one settle call Engine.Settle already makes for
// reset_on_success and count = "failures".

// MaxCostLimit bounds max_cost and a constant cost; the rule's capacity
// (its burst for gcra and the buckets, its limit for the windows) bounds
// them too, since a cost above it could never be admitted.
const MaxCostLimit = 1 << 40

// MaxCostHeaderBytes caps the value of a cost header (request) or a
// settle_from header (response) that is read at all: a longer value is
// invalid, whatever it holds, so parsing it costs nothing.
const MaxCostHeaderBytes = 32

// ruleCost is a rule's cost, max_cost and settle_from. The zero value is a
// cost of 1, no header and no settling.
type ruleCost struct {
	n          int64  // the constant cost (0: 1)
	header     []byte // the request header the cost is read from, nil: constant
	headerName string // the same, as written (MultiHeader)
	max        int64  // max_cost; 0 when no cost comes from outside the policy
	settleFrom []byte // the response header naming the real cost, nil: none
}

// MultiHeader is what a request's Fields may also implement: every value of
// a header, one per field line, in order, as fasthttp's PeekAll gives them
// (the result is only valid until the next call). Without it, a cost
// header's first line is read alone.
type MultiHeader interface {
	HeaderAll(name string) [][]byte
}

// ResponseHeaders reads the origin's response headers for settle_from
// (*fasthttp.ResponseHeader implements it): the first value of name, nil
// when absent.
type ResponseHeaders interface {
	PeekBytes(name []byte) []byte
}

// Cost returns the rule's constant cost (1 unless cost = N), or 0 when the
// cost is read from a request header (CostHeader).
func (r *Rule) Cost() int64 {
	switch {
	case r.cost.header != nil:
		return 0
	case r.cost.n > 0:
		return r.cost.n
	}
	return 1
}

// CostHeader returns the request header a rule's cost is read from, "" for
// a constant cost.
func (r *Rule) CostHeader() string { return r.cost.headerName }

// MaxCost returns the rule's max_cost, 0 when unset.
func (r *Rule) MaxCost() int64 { return r.cost.max }

// SettleFrom returns the response header the rule's real cost is read from
// after the origin answers, "" when none.
func (r *Rule) SettleFrom() string { return string(r.cost.settleFrom) }

// settles reports whether the rule settles its cost after the origin
// answers: Engine.Check then sets Decision.Settle.
func (c *ruleCost) settles() bool { return c.settleFrom != nil }

// of returns the cost of req under c, always within 1..max (the constant
// when no header is set):
//   - absent (or empty): 1, what a client that declares nothing pays; it
//     gains nothing over sending "1" itself.
//   - an integer, optionally signed, clamped to 1..max_cost: "0" and "-5"
//     cost 1, "1000000000000000000" costs max_cost.
//   - anything else ("abc", "1e18", "+5", "2, 3", over MaxCostHeaderBytes):
//     max_cost. An origin may read a malformed value as anything (a
//     parseInt reads "10abc" as 10), so the edge charges the most the rule
//     lets one request cost rather than the least.
//   - several field lines: the largest of their costs, so that whichever
//     line the origin reads, the request was charged at least that.
func (c *ruleCost) of(req *Request) int64 {
	if c.header == nil {
		return max(c.n, 1)
	}
	if req.Fields == nil {
		return 1
	}
	if mh, ok := req.Fields.(MultiHeader); ok {
		vals := mh.HeaderAll(c.headerName)
		cost := int64(1)
		for _, v := range vals {
			cost = max(cost, RequestCost(v, c.max))
		}
		return cost
	}
	return RequestCost(req.Fields.Header(c.header), c.max)
}

// RequestCost is a cost header's value v read as a request's cost, clamped
// to 1..maxCost (maxCost ≥ 1): 1 when v is empty, the integer clamped when
// v is one (surrounding spaces and tabs allowed), maxCost otherwise
// (ruleCost.of says why). It does not allocate.
func RequestCost(v []byte, maxCost int64) int64 {
	n, st := parseCost(v)
	switch st {
	case costEmpty:
		return 1
	case costInvalid:
		return maxCost
	}
	return min(max(n, 1), maxCost)
}

// SettleCost is a settle_from header's value v read as a request's real
// cost: the integer clamped to 0..maxCost, and ok false when v is absent
// or not an integer (the charged cost then stands). clamped reports a value
// that was out of range (negative, or over maxCost) or invalid, which the
// gateway counts (edge_settle_invalid_total).
func SettleCost(v []byte, maxCost int64) (cost int64, ok, clamped bool) {
	n, st := parseCost(v)
	switch st {
	case costEmpty:
		return 0, false, false
	case costInvalid:
		return 0, false, true
	}
	c := min(max(n, 0), maxCost)
	return c, true, c != n
}

type costStatus uint8

const (
	costInt costStatus = iota
	costEmpty
	costInvalid
)

// parseCost parses an optionally negative decimal integer surrounded by
// optional spaces and tabs, at most MaxCostHeaderBytes long; an integer
// beyond ±MaxCostLimit reads as ±(MaxCostLimit+1), which every clamp
// treats alike.
func parseCost(v []byte) (int64, costStatus) {
	if len(v) > MaxCostHeaderBytes {
		return 0, costInvalid
	}
	i, j := 0, len(v)
	for i < j && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	for j > i && (v[j-1] == ' ' || v[j-1] == '\t') {
		j--
	}
	if i == j {
		return 0, costEmpty
	}
	neg := v[i] == '-'
	if neg {
		i++
	}
	if i == j {
		return 0, costInvalid
	}
	var n int64
	for ; i < j; i++ {
		d := v[i]
		if d < '0' || d > '9' {
			return 0, costInvalid
		}
		if n <= MaxCostLimit {
			n = n*10 + int64(d-'0')
		}
	}
	n = min(n, MaxCostLimit+1)
	if neg {
		n = -n
	}
	return n, costInt
}

// capacity is the most units one take of the rule can ever fit: its burst
// for gcra and the buckets, its limit for the windows.
func (r *Rule) capacity() int64 {
	switch r.Algorithm {
	case GCRA, TokenBucket, LeakyBucket:
		return r.Burst
	}
	return r.Limit
}

// compileCost compiles cost, max_cost and settle_from. It runs after the
// rule's numbers, count and reset_on_success are compiled.
func (c *Compiler) compileCost(rb *ruleBlock, r *Rule) {
	costSet := rb.Cost != nil && !IsNull(rb.Cost)
	if !costSet && rb.MaxCost == nil && rb.SettleFrom == nil {
		return
	}
	if !r.counts() {
		rng := rb.MaxCostRange
		switch {
		case costSet:
			rng = rb.Cost.Range()
		case rb.SettleFrom != nil:
			rng = rb.SettleFromRange
		}
		c.Errorf(rng, "cost not used", "%s, so it charges no cost; remove cost, max_cost and settle_from", uncounted(r.Action))
		return
	}
	if r.Distinct != nil {
		rng := rb.MaxCostRange
		switch {
		case costSet:
			rng = rb.Cost.Range()
		case rb.SettleFrom != nil:
			rng = rb.SettleFromRange
		}
		c.Errorf(rng, "cost not used", "a count_distinct rule counts one value per request, whatever it costs; remove cost, max_cost and settle_from")
		return
	}
	capacity, what := r.capacity(), "limit"
	if r.Algorithm == GCRA || r.Algorithm == TokenBucket || r.Algorithm == LeakyBucket {
		what = "burst"
	}
	if costSet {
		if !c.costValue(rb.Cost, r) {
			return
		}
		if r.cost.header == nil && capacity > 0 && r.cost.n > capacity {
			c.Errorf(rb.Cost.Range(), "cost too high", "cost %d is above the rule's %s of %d: no request could ever be admitted", r.cost.n, what, capacity)
			return
		}
	}
	if rb.SettleFrom != nil {
		name := strings.TrimSpace(*rb.SettleFrom)
		if !httpsyntax.IsToken(name) {
			c.Errorf(rb.SettleFromRange, "Invalid settle_from", "%q is not a header name; write the response header the origin names the real cost in, such as \"X-Actual-Cost\"", *rb.SettleFrom)
			return
		}
		switch {
		case r.Count == CountFailures:
			c.Errorf(rb.SettleFromRange, "settle_from with count = \"failures\"", "count = \"failures\" already settles each request after the origin answers (a failure keeps its charge, anything else is refunded); remove one of them")
			return
		case r.ResetOnSuccess:
			c.Errorf(rb.SettleFromRange, "settle_from with reset_on_success", "reset_on_success clears the counter after a success, which leaves nothing to settle; remove one of them")
			return
		}
		r.cost.settleFrom = []byte(name)
		c.addSettleHeader(r.cost.settleFrom)
	}
	needMax := r.cost.header != nil || r.cost.settleFrom != nil
	if rb.MaxCost == nil {
		if needMax {
			c.Errorf(rb.DefRange, "Missing max_cost", "rule %q reads a cost from outside the policy (%s); set max_cost, the most one request may be charged, at most the rule's %s of %d", rb.Name, costSource(r), what, capacity)
		}
		return
	}
	m := *rb.MaxCost
	switch {
	case !needMax:
		c.Errorf(rb.MaxCostRange, "max_cost not used", "max_cost caps a cost read from a request header (cost = \"header:NAME\") or from settle_from; a constant cost needs none")
		return
	case m < 1:
		c.Errorf(rb.MaxCostRange, "Invalid max_cost", "max_cost must be at least 1, got %d", m)
		return
	case capacity > 0 && m > capacity:
		c.Errorf(rb.MaxCostRange, "max_cost too high", "max_cost %d is above the rule's %s of %d: a request that costs it could never be admitted", m, what, capacity)
		return
	case r.cost.header == nil && m < r.Cost():
		c.Errorf(rb.MaxCostRange, "max_cost too low", "max_cost %d is below the rule's cost of %d", m, r.Cost())
		return
	}
	r.cost.max = m
}

func costSource(r *Rule) string {
	if r.cost.header != nil {
		return "cost = \"header:" + r.cost.headerName + "\""
	}
	return "settle_from"
}

// costValue compiles cost = N or cost = "header:NAME" into r.cost.
func (c *Compiler) costValue(expr hcl.Expression, r *Rule) bool {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		c.diags = append(c.diags, diags...)
		return false
	}
	rng := expr.Range()
	switch {
	case v.Type() == cty.Number && v.IsKnown() && !v.IsNull():
		bf := v.AsBigFloat()
		if !bf.IsInt() {
			c.Errorf(rng, "Invalid cost", "cost must be a whole number of units, got %s", bf.Text('g', -1))
			return false
		}
		n, acc := bf.Int64()
		if acc != big.Exact || n < 1 || n > MaxCostLimit {
			c.Errorf(rng, "Invalid cost", "cost must be between 1 and %d, got %s", int64(MaxCostLimit), bf.Text('g', -1))
			return false
		}
		r.cost.n = n
		return true
	case v.Type() == cty.String && v.IsKnown() && !v.IsNull():
		s := v.AsString()
		name, found := strings.CutPrefix(s, "header:")
		if !found || !httpsyntax.IsToken(name) || len(name) > 256 {
			c.Errorf(rng, "Invalid cost", "%q is not a cost; write a number of units (cost = 5) or the request header the client declares it in, as a key names one (cost = \"header:X-Cost\")", s)
			return false
		}
		r.cost.header, r.cost.headerName = []byte(name), name
		c.ReadsHeader(name)
		return true
	}
	c.Errorf(rng, "Invalid cost", "cost is a number (cost = 5) or \"header:NAME\" (cost = \"header:X-Cost\")")
	return false
}

// settleCost appends to settle the ops that settle m's cost once the origin
// answered: the real cost from h's settle_from header, minus what the take
// charged, added (OpAdd: never refused, into debt) or refunded, on the
// rule's key and its IP ceiling's. A response without the header, or with
// a value that is not an integer, settles nothing; invalid counts the
// values clamped or ignored.
func settleCost(m *Match, ops []Op, h ResponseHeaders, settle []Op, invalid *int) []Op {
	c := &m.Rule.cost
	if h == nil || m.Known {
		return settle
	}
	real, ok, clamped := SettleCost(h.PeekBytes(c.settleFrom), c.max)
	if clamped {
		*invalid++
	}
	if !ok {
		return settle
	}
	for _, i := range [2]int{m.Op, m.CeilingOp} {
		if i < 0 {
			continue
		}
		op := ops[i]
		diff := real - op.Cost
		switch {
		case diff > 0:
			op.Kind, op.Cost = OpAdd, diff
		case diff < 0:
			op.Kind, op.Cost = OpRefund, -diff
		default:
			continue
		}
		op.Attempts = false
		settle = append(settle, op)
	}
	return settle
}

// SetResponse gives Engine.Settle the origin's response headers, for the
// rules with settle_from; the gateway calls it before Settle. The Scratch
// holds h until the next request begins.
func (s *Scratch) SetResponse(h ResponseHeaders) { s.resp = h }

// SettleInvalid returns how many settle_from values the last Settle found
// invalid or out of range (SettleCost's clamped).
func (s *Scratch) SettleInvalid() int { return s.settleInvalid }

// SettleHeaders returns the response headers the policy's rules settle
// their cost from (settle_from), one per name compared case-insensitively;
// the gateway strips them from the origin's answer. The caller must not
// modify them.
func (p *Policy) SettleHeaders() [][]byte { return p.settleHeaders }

// addSettleHeader records a settle_from header (SettleHeaders).
func (c *Compiler) addSettleHeader(name []byte) {
	for _, have := range c.p.settleHeaders {
		if strings.EqualFold(string(have), string(name)) {
			return
		}
	}
	c.p.settleHeaders = append(c.p.settleHeaders, name)
}
