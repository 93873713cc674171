package rules

// Known visitors: a lockout that cannot be a weapon (docs/policy.md,
// "known_visitors"). An account-wide failure rule (key = ["account"],
// count = "failures") would let anyone lock the real user out by failing
// on purpose. With known_visitors = "30d" and known_by = ["visitor"], a
// success records a marker for the account and the visitor that logged
// in; for the next 30 days that visitor is not held to the rule (it is
// decided, never refuses and is never charged), while everyone else is.
//
// A marker is a sliding_log counter of limit 1 whose period is the
// known_visitors time: present (a peek is refused) for exactly that long
// after the last success. Its key hashes the rule's key values and the
// known_by values together, under the rule's ID with the marker flag, so
// no store sees the account or the visitor.

// markerFlag marks a known-visitor marker in a key's tag byte (0x80: a
// key of several parts, 0x40: a ceiling).
const markerFlag = 0x20

// marker is a known-visitor marker of one match of the request.
type marker struct {
	match int // index in Scratch.Matches
	key   Key
}

// addMarker computes the marker key of match i (rule r, whose key values
// s.buf holds from its key call) and queues its check. A known_by value
// that is missing or invalid means the visitor is not recognised: no
// marker, the rule applies.
func (e *Engine) addMarker(r *Rule, req *Request, s *Scratch, i int) {
	buf := append(s.mbuf[:0], s.buf...)
	buf = append(buf, 0xff) // the rule's values end here
	for j, ch := range r.knownBy {
		buf = append(buf, r.knownTags[j])
		n := len(buf)
		out, st := ch.AppendValue(buf, req, s)
		if st != Present || len(out) <= n {
			s.mbuf = buf
			return
		}
		buf = out
	}
	s.mbuf = buf
	var k Key
	copy(k[0:8], r.ID[:])
	k[8] = r.keyTags[0] | markerFlag
	copy(k[9:], s.valueHash(buf))
	s.Matches[i].Marker, s.Matches[i].HasMarker = k, true
	s.markers = append(s.markers, marker{match: i, key: k})
}

// markKnown takes the matches whose marker is present (res, in the order
// of s.markers, from precheck's call) out of their rule: their ops are
// decided like a dry-run peek (never refusing, never consuming) and
// Match.Known is set. A fallback's guess (StoreError) knows no one.
func (e *Engine) markKnown(s *Scratch, res []Result) {
	for i, mk := range s.markers {
		if res[i].Allowed || res[i].StoreError {
			continue
		}
		m := &s.Matches[mk.match]
		m.Known = true
		for _, j := range [2]int{m.Op, m.CeilingOp} {
			if j >= 0 {
				s.Ops[j].Kind, s.Ops[j].Enforce, s.Ops[j].Attempts = OpPeek, false, false
			}
		}
	}
}

// knownVisitors is the Hook that records the marker once the origin's
// answer for the account is a success (success_status, or X-Edge-Outcome:
// success): the visitor is known for the rule's known_visitors time from
// now, a known one's time starting again.
type knownVisitors struct {
	success []int
	us      int64
}

func (h knownVisitors) AfterOrigin(m *Match, _ []Op, status int, outcome []byte, settle []Op) []Op {
	if !m.HasMarker || !IsSuccess(h.success, status, outcome) {
		return settle
	}
	return append(settle, knownOp(OpAdd, m.Rule, m.Marker))
}

// knownOp is the op of r's known-visitor marker k: kind OpPeek to check
// it, OpAdd to write it. A Marker: the memory store keeps it in r's marker
// budget and never evicts it while it lasts, so neither a flood of r's new
// keys nor other visitors' markers can make a known visitor unknown, and a
// marker never evicts r's counters (docs/memory-store.md, "Markers").
func knownOp(kind OpKind, r *Rule, k Key) Op {
	return Op{
		Kind: kind, Algorithm: SlidingLog, Key: k, Limit: 1, PeriodUS: r.knownUS,
		Cost: 1, Enforce: kind == OpAdd, OnError: FailOpen, MaxKeys: int32(r.MaxKeys), Marker: true,
		NetworkKeys: int32(r.NetworkKeys),
	}
}
