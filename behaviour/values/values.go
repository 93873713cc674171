package values

import (
	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/rules"
)

// MaxCombinations bounds the value combinations one rule's key and
// count_distinct can take in a request: the product of their
// characteristics' MaxValues. A rule over it is refused at compile, so a
// request costs at most this many ops per rule.
const MaxCombinations = 16

// maxMulti is the most characteristics with several values one rule can
// have: each has at least two, and their product is at most
// MaxCombinations.
const maxMulti = 4

// Feature returns the counting of identities with several values.
func Feature() rules.Feature {
	return rules.Feature{Name: "values", RuleDone: compile}
}

// Stage is a rule's characteristics that can carry several values.
type Stage struct {
	parts []part
	// of gives each key characteristic's index in parts (-1:
	// single-valued); distinct count_distinct's.
	of       []int8
	distinct int8
	slot     int // the memo slot of the combination being keyed
}

// part is one characteristic of a rule that can carry several values.
type part struct {
	ch rules.MultiCharacteristic
	// at is the characteristic's index in Rule.Key, or -1 for the rule's
	// count_distinct characteristic.
	at int
}

// combo is the combination of values a request is keyed on, in the memo
// slot (its Done: a combination other than the first): digit[k] is the
// value of the rule's k-th part (0: the first, which is every
// single-valued characteristic's), n[k] how many the request carries.
type combo struct {
	digit, n [maxMulti]uint8
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "values" }

// compile gives r a Stage when its key or count_distinct can carry
// several values, and refuses a rule whose combinations could exceed
// MaxCombinations.
func compile(c *rules.Compiler, r *rules.Rule) {
	st := &Stage{distinct: -1}
	total := 1
	add := func(ch rules.Characteristic, at int) {
		mc, ok := ch.(rules.MultiCharacteristic)
		if !ok || mc.MaxValues() < 2 {
			return
		}
		total *= mc.MaxValues()
		st.parts = append(st.parts, part{ch: mc, at: at})
	}
	for i, ch := range r.Key {
		add(ch, i)
	}
	if r.Distinct != nil {
		add(r.Distinct, -1)
	}
	if len(st.parts) == 0 {
		return
	}
	if total > MaxCombinations || len(st.parts) > maxMulti {
		rng := r.DefRange
		if a := c.RuleAttr(r, "key"); a != nil {
			rng = a.Expr.Range()
		}
		c.Errorf(rng, "Too many identity values", "rule %q's key and count_distinct can carry %d combinations of values in one request (each identity as many as its sources that can be present together), more than %d; list fewer sources, or set on_conflict = \"reject\" in identity { }", r.Name, total, MaxCombinations)
		return
	}
	st.of = make([]int8, len(r.Key))
	for i := range st.of {
		st.of[i] = -1
	}
	for k, p := range st.parts {
		if p.at >= 0 {
			st.of[p.at] = int8(k)
		} else {
			st.distinct = int8(k)
		}
	}
	st.slot = c.Slot("values")
	r.AddStage(st)
}

// AppendKeyValue appends the value of the characteristic at in the
// combination being keyed, when it is not the first.
func (st *Stage) AppendKeyValue(at int, buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status, bool) {
	m := s.Memo(st.slot)
	if !m.Done {
		return nil, 0, false // the first combination
	}
	k := st.distinct
	if at >= 0 {
		k = st.of[at]
	}
	if k < 0 {
		return nil, 0, false
	}
	d := m.State.(*combo).digit[k]
	if d == 0 {
		return nil, 0, false
	}
	out, status := st.parts[k].ch.AppendValueAt(buf, int(d), req, s)
	return out, status, true
}

// begin returns the request's combo and how many combinations of values
// the rule's key and count_distinct take for req (1 for a single value of
// each, at most MaxCombinations), recording each part's count. The memo
// slot is marked for further combinations (end clears it).
func (st *Stage) begin(req *rules.Request, s *rules.Scratch) (*combo, int) {
	m := s.Memo(st.slot)
	c := memo.State[combo](m)
	total := 1
	for k, p := range st.parts {
		n := min(max(p.ch.Values(req, s), 1), p.ch.MaxValues(), 255)
		c.n[k] = uint8(n)
		total *= n
	}
	m.Done = true
	return c, total
}

// set makes j (0 ≤ j < combinations) the combination being keyed: a
// mixed-radix number, the first part varying fastest.
func (st *Stage) set(c *combo, j int) {
	for k := range st.parts {
		n := int(c.n[k])
		c.digit[k] = uint8(j % n)
		j /= n
	}
}

// end makes the first combination the one keyed again.
func (st *Stage) end(s *rules.Scratch, c *combo) {
	*c = combo{}
	s.Memo(st.slot).Done = false
}

// Expand adds, after s.Matches[first] (the rule's match of req for its
// first combination of values, counted), a match for each further
// combination whose key (and count_distinct value) no earlier one has:
// equal values count once. A count_distinct value on a key an earlier
// combination of the request also counts on takes one more place: the
// store judges every op against the state before the call, so a request
// bringing two new values to a set one short of its limit is refused
// rather than let in with one of them uncounted (a Distinct op's Cost,
// counter.Check).
func (st *Stage) Expand(req *rules.Request, s *rules.Scratch, first int) {
	c, total := st.begin(req, s)
	m := s.Matches[first]
	r := m.Rule
	lease := s.Ops[m.Op].Member // a concurrency rule's, the same for every value
	m.Op, m.CeilingOp = -1, -1
	for j := 1; j < total; j++ {
		st.set(c, j)
		key, status := s.RequestKey(r, req)
		member := lease
		if status == rules.Present && r.Distinct != nil {
			member, status = s.RequestMember(r, req)
		}
		if status != rules.Present {
			continue // every value resolved with the first combination: not expected
		}
		cost, dup := int64(1), false
		for i := first; i < len(s.Matches); i++ {
			op := &s.Ops[s.Matches[i].Op]
			if op.Key != key {
				continue
			}
			if op.Member == member || r.Distinct == nil {
				dup = true
				break
			}
			cost++
		}
		if dup {
			continue
		}
		// A rule's own cost is its stages' (Shaper: behaviour/cost).
		m.Value = uint8(min(len(s.Matches)-first, 255))
		s.CountMatch(r, req, m, key, member, cost)
	}
	if len(s.Matches)-first > 1 {
		for i := first; i < len(s.Matches); i++ {
			s.Matches[i].Several = true
		}
	}
	st.end(s, c)
}

// AppendKeys appends r's counter keys for req's further combinations of
// values that are present.
func (st *Stage) AppendKeys(dst []rules.Key, r *rules.Rule, req *rules.Request, s *rules.Scratch) []rules.Key {
	c, total := st.begin(req, s)
	for j := 1; j < total; j++ {
		st.set(c, j)
		if k, status := s.RequestKey(r, req); status == rules.Present {
			dst = append(dst, k)
		}
	}
	st.end(s, c)
	return dst
}

var _ rules.Expander = (*Stage)(nil)
