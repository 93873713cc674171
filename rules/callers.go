package rules

import "bytes"

// Naming a request's caller for a marker (a key of flag MarkerFlag): the
// markers that exempt a caller name it exactly (known { } and
// known_visitors, behaviour/known: CallerCharacteristic, an account as it
// was sent, a visitor by its ID alone), those that accuse one by its
// counted values (ban_by's guilt, behaviour/ban: every spelling that shares the
// counter is guilty with it).

// MarkerFlag marks a marker in a key's tag byte (0x80: a key of several
// parts, 0x40: a ceiling): a known caller's or a guilty visitor's, whose
// key hashes the values that name the caller.
const MarkerFlag = 0x20

const markerFlag = MarkerFlag

// naming is how a marker names the request's caller by its values.
type naming uint8

const (
	// exactNames: by each characteristic's caller value
	// (CallerCharacteristic), for the markers that exempt a caller
	// (known_visitors, known { }); without it, by the counted value, for
	// the markers that accuse one (ban_by's guilt: every spelling that
	// shares the counter is guilty with it).
	exactNames naming = 1 << iota
	// bucketNames: a bucket many clients share (BucketCharacteristic)
	// names that bucket (known_visitors' cookieless bucket of an address);
	// without it, it names no one.
	bucketNames
)

// AppendCallers appends to buf the request's values of chars, each after
// its tag (tags[i], CharacteristicType.Tag), each naming the caller
// exactly (CallerCharacteristic: an account as it was sent, a visitor by
// its ID alone), for a marker that exempts a caller (behaviour/known), and
// reports whether they name one: not when a value is missing or invalid,
// when the request carries several values of it (an identity whose
// sources disagree names no one caller), or, unless buckets, when it is a
// bucket many clients share (BucketCharacteristic; with buckets the bucket
// names itself, as an address names its cookieless visitors). buf comes
// back grown either way, for its capacity; it must be the caller's.
func (s *Scratch) AppendCallers(buf []byte, chars []Characteristic, tags []byte, buckets bool, req *Request) ([]byte, bool) {
	how := exactNames
	if buckets {
		how |= bucketNames
	}
	return appendCallerValues(buf, chars, tags, how, req, s)
}

// AppendKeyCallers is AppendCallers over r's key, buckets naming their
// bucket: r's global, the same for every request, appends nothing.
func (s *Scratch) AppendKeyCallers(buf []byte, r *Rule, req *Request) ([]byte, bool) {
	for j, ch := range r.Key {
		var ok bool
		if buf, ok = appendCaller(buf, ch, r.keyTags[j], r.keyShared[j], exactNames|bucketNames, req, s); !ok {
			return buf, false
		}
	}
	return buf, true
}

// KeyTag returns the tag of r's i-th key characteristic
// (CharacteristicType.Tag), which a counter key of r carries in its tag
// byte for i = 0.
func (r *Rule) KeyTag(i int) byte { return r.keyTags[i] }

// appendCaller appends the request's value of ch, after its tag, to buf,
// named as how says; ok is false when it is missing or invalid, when
// the request carries several values (an identity whose sources disagree
// names no one caller: a login with its own username and a victim's email
// must be neither recognised as its own nor recorded as the victim's), or,
// without bucketNames, when it is a shared bucket. shared: the
// characteristic is the same for every request (global) and may append
// nothing. buf comes back grown either way, for its capacity.
func appendCaller(buf []byte, ch Characteristic, tag byte, shared bool, how naming, req *Request, s *Scratch) ([]byte, bool) {
	if b, isBucket := ch.(BucketCharacteristic); isBucket && how&bucketNames == 0 && b.SharedBucket(req, s) {
		return buf, false
	}
	buf = append(buf, tag)
	n := len(buf)
	var out []byte
	var st Status
	if cc, ok := ch.(CallerCharacteristic); ok && how&exactNames != 0 {
		out, st = cc.AppendCaller(buf, req, s)
	} else {
		out, st = ch.AppendValue(buf, req, s)
	}
	if st != Present || len(out) < n || (len(out) == n && !shared) || !bytes.Equal(out[:n], buf) {
		return buf, false
	}
	if mc, multi := ch.(MultiCharacteristic); multi && mc.MaxValues() > 1 && mc.Values(req, s) > 1 {
		return out, false
	}
	return out, true
}

// appendCallerValues appends the request's values of chars (each after its
// tag, as appendCaller does) to buf; ok is false when one names no one.
func appendCallerValues(buf []byte, chars []Characteristic, tags []byte, how naming, req *Request, s *Scratch) ([]byte, bool) {
	for j, ch := range chars {
		var ok bool
		if buf, ok = appendCaller(buf, ch, tags[j], false, how, req, s); !ok {
			return buf, false
		}
	}
	return buf, true
}

// folds reports whether r's key folds what req sent into a form other
// callers' values share (CallerCharacteristic.Folds): a success of the
// request then clears no counter of r (reset_on_success).
func (r *Rule) folds(req *Request, s *Scratch) bool {
	for _, ch := range r.Key {
		if cc, ok := ch.(CallerCharacteristic); ok && cc.Folds(req, s) {
			return true
		}
	}
	return false
}

// knownMatch reports whether the request's match of r was taken out of r
// (Scratch.TakeOut: a known caller, a forgive's exemption): r's ban does
// not refuse what r does not hold.
func (s *Scratch) knownMatch(r *Rule) bool {
	for i := range s.Matches {
		if s.Matches[i].Rule == r && s.Matches[i].Known {
			return true
		}
	}
	return false
}

// peekOnly makes op decided as a dry-run peek: it never refuses, never
// consumes.
func peekOnly(op *Op) { op.Kind, op.Enforce, op.Attempts = OpPeek, false, false }
