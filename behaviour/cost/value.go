package cost

import "github.com/edge-gateway/edge/rules"

// MaxCostLimit bounds max_cost and a constant cost; the rule's capacity
// (its burst for gcra and the buckets, its limit for the windows) bounds
// them too, since a cost above it could never be admitted.
const MaxCostLimit = 1 << 40

// MaxCostHeaderBytes caps the value of a cost header (request) or a
// settle_from header (response) that is read at all: a longer value is
// invalid, whatever it holds, so parsing it costs nothing.
const MaxCostHeaderBytes = 32

// MultiHeader is what a request's Fields may also implement: every value of
// a header, one per field line, in order, as fasthttp's PeekAll gives them
// (the result is only valid until the next call). Without it, a cost
// header's first line is read alone.
type MultiHeader interface {
	HeaderAll(name string) [][]byte
}

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
func (c *Stage) of(req *rules.Request) int64 {
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
// (Stage.of says why). It does not allocate.
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
