package fields

import (
	"bytes"

	"github.com/edge-gateway/edge/rules"
)

// An identity's values (docs/policy.md, "identity { }"): every listed
// source that is present counts, not the first alone, because an origin
// may read any of them (a login body with a username and an email, an
// origin that logs people in by email). Equal values, once normalised,
// count once; an identity whose sources give different values carries
// them all (rules.MultiCharacteristic), or is Invalid under on_conflict =
// "reject".

// MaxValues returns the most values a request can carry for an identity
// with the sources srcs: every header, query and cookie source can be
// present together, but a body is JSON or a form, so only the sources of
// one body format can be (a json: source on a form body is Missing).
func MaxValues(srcs []Source) int {
	other, json, form := 0, 0, 0
	for _, s := range srcs {
		switch s.Kind {
		case SourceJSON:
			json++
		case SourceForm:
			form++
		default:
			other++
		}
	}
	return other + max(json, form)
}

// Normal is one request's distinct values of an identity, normalised as
// its feature counts them (an account's normal form, a phone's E.164):
// Resolve adds each present source's value to it.
type Normal interface {
	// Reset forgets the values of the request before.
	Reset()
	// Add normalises v and records it unless a value equal to it is
	// recorded; false when v cannot be normalised (the identity is then
	// Invalid).
	Add(v string) bool
	// Len is the number of distinct values recorded.
	Len() int
}

// ResolveOnce is Resolve into n, the state of memo slot m, at most once
// per request: the first call resets n and records the status in m, and
// every call returns it.
func ResolveOnce(m *rules.Memo, srcs []Source, conflict rules.Conflict, n Normal, req *rules.Request, s *rules.Scratch) rules.Status {
	if !m.Done {
		m.Done = true
		n.Reset()
		m.Status = Resolve(srcs, conflict, n, req, s)
	}
	return m.Status
}

// Resolve reads every source of an identity, in the order listed
// (Lookup), adding each present value to n, which the caller emptied for
// the request. It returns Missing when no source is present; Invalid when
// a present source is (an origin could read it another way) or n refuses
// its value, or when conflict is rules.ConflictReject and the values
// differ; Present otherwise.
func Resolve(srcs []Source, conflict rules.Conflict, n Normal, req *rules.Request, s *rules.Scratch) rules.Status {
	st := rules.Missing
	var body SourceKind // the body's format, once a source of it was present
	for _, src := range srcs {
		if body != 0 && src.Body() != BodyNone && src.Kind != body {
			continue // a source of the other format: Missing on this body (BodyField)
		}
		v, status := Lookup(src, srcs, req, s)
		switch status {
		case rules.Missing:
			continue
		case rules.Present:
		default:
			return rules.Invalid
		}
		if src.Kind == SourceJSON || src.Kind == SourceForm {
			body = src.Kind
		}
		if !n.Add(v) {
			return rules.Invalid
		}
		st = rules.Present
	}
	if st == rules.Present && conflict == rules.ConflictReject && n.Len() > 1 {
		return rules.Invalid
	}
	return st
}

// Values holds one request's distinct values of an identity end to end in
// caller-owned memory (a memo slot's State), so that, once warm, keeping
// them allocates nothing. Append a value to Tail's buffer and Keep it.
type Values struct {
	buf  []byte
	ends []int
}

// Reset empties v for a new request, keeping its memory.
func (v *Values) Reset() { v.buf, v.ends = v.buf[:0], v.ends[:0] }

// Tail returns v's buffer, to append the next value to.
func (v *Values) Tail() []byte { return v.buf }

// Keep records as a value what buf (Tail's buffer, appended to) holds past
// the values already kept, unless it equals one of them (then it is
// dropped). It reports whether the value was new.
func (v *Values) Keep(buf []byte) bool {
	start := len(v.buf)
	val := buf[start:]
	for i := range v.ends {
		if bytes.Equal(v.At(i), val) {
			v.buf = buf[:start]
			return false
		}
	}
	v.buf = buf
	v.ends = append(v.ends, len(buf))
	return true
}

// Drop forgets what buf holds past the values kept (a value that did not
// normalise), keeping the memory.
func (v *Values) Drop(buf []byte) { v.buf = buf[:len(v.buf)] }

// Len returns the number of values kept.
func (v *Values) Len() int { return len(v.ends) }

// At returns value i (0 ≤ i < Len), valid until v changes.
func (v *Values) At(i int) []byte {
	start := 0
	if i > 0 {
		start = v.ends[i-1]
	}
	return v.buf[start:v.ends[i]]
}
