// Package callers names a request's caller for a marker, a key of flag
// Flag that records something of a caller (docs/policy.md,
// "known_visitors", "known" and "ban_by"): the markers that exempt a
// caller name it exactly (known { } and known_visitors, behaviour/known:
// rules.CallerCharacteristic, an account as it was sent, a visitor by its
// ID alone), those that accuse one by its counted values (ban_by's guilt,
// behaviour/ban: every spelling that shares the counter is guilty with
// it). What it appends the caller hashes into a marker's key
// (rules.Scratch.HashKey). Its functions keep no state, read the request
// through its characteristics only and allocate nothing once buf has
// grown; safe for concurrent use on distinct Scratches.
package callers

import (
	"bytes"

	"github.com/edge-gateway/edge/rules"
)

// Flag marks a marker in a key's tag byte, whose three top bits are the
// key's flags (rules.MaxTag; 0x80: a key of several parts, 0x40: a
// ceiling): a known caller's or a guilty visitor's, whose key hashes the
// values that name the caller.
const Flag = 0x20

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

// Exact appends to buf the request's values of chars, each after its
// tag (tags[i], CharacteristicType.Tag), each naming the caller exactly
// (rules.CallerCharacteristic: an account as it was sent, a visitor by
// its ID alone), for a marker that exempts a caller (behaviour/known),
// and reports whether they name one: not when a value is missing or
// invalid, when the request carries several values of it (an identity
// whose sources disagree names no one caller), or, unless buckets, when
// it is a bucket many clients share (rules.BucketCharacteristic; with
// buckets the bucket names itself, as an address names its cookieless
// visitors). buf comes back grown either way, for its capacity; it must
// be the caller's.
func Exact(buf []byte, s *rules.Scratch, chars []rules.Characteristic, tags []byte, buckets bool, req *rules.Request) ([]byte, bool) {
	how := exactNames
	if buckets {
		how |= bucketNames
	}
	return appendValues(buf, chars, tags, how, req, s)
}

// Key is Exact over r's key, buckets naming their bucket: r's
// global, the same for every request, appends nothing.
func Key(buf []byte, s *rules.Scratch, r *rules.Rule, req *rules.Request) ([]byte, bool) {
	for j, ch := range r.Key {
		var ok bool
		if buf, ok = appendCaller(buf, ch, r.KeyTag(j), r.KeyShared(j), exactNames|bucketNames, req, s); !ok {
			return buf, false
		}
	}
	return buf, true
}

// Counted appends to buf the request's values of chars, each after its tag
// (tags[i]), the values their rules count, for a marker that names the
// caller by them (ban_by's guilt: every spelling that shares a counter is
// named with it). ok is false when one of them names no one: missing or
// invalid, several values (sources that disagree), or a bucket many
// clients share (rules.BucketCharacteristic). buf comes back grown either
// way.
func Counted(buf []byte, s *rules.Scratch, chars []rules.Characteristic, tags []byte, req *rules.Request) ([]byte, bool) {
	return appendValues(buf, chars, tags, 0, req, s)
}

// appendValues appends the request's values of chars (each after its
// tag, as appendCaller does) to buf; ok is false when one names no one.
func appendValues(buf []byte, chars []rules.Characteristic, tags []byte, how naming, req *rules.Request, s *rules.Scratch) ([]byte, bool) {
	for j, ch := range chars {
		var ok bool
		if buf, ok = appendCaller(buf, ch, tags[j], false, how, req, s); !ok {
			return buf, false
		}
	}
	return buf, true
}

// appendCaller appends the request's value of ch, after its tag, to buf,
// named as how says; ok is false when it is missing or invalid, when
// the request carries several values (an identity whose sources disagree
// names no one caller: a login with its own username and a victim's email
// must be neither recognised as its own nor recorded as the victim's), or,
// without bucketNames, when it is a shared bucket. shared: the
// characteristic is the same for every request (global) and may append
// nothing. buf comes back grown either way, for its capacity.
func appendCaller(buf []byte, ch rules.Characteristic, tag byte, shared bool, how naming, req *rules.Request, s *rules.Scratch) ([]byte, bool) {
	if b, isBucket := ch.(rules.BucketCharacteristic); isBucket && how&bucketNames == 0 && b.SharedBucket(req, s) {
		return buf, false
	}
	buf = append(buf, tag)
	n := len(buf)
	var out []byte
	var st rules.Status
	if cc, ok := ch.(rules.CallerCharacteristic); ok && how&exactNames != 0 {
		out, st = cc.AppendCaller(buf, req, s)
	} else {
		out, st = ch.AppendValue(buf, req, s)
	}
	if st != rules.Present || len(out) < n || (len(out) == n && !shared) || !bytes.Equal(out[:n], buf) {
		return buf, false
	}
	if mc, multi := ch.(rules.MultiCharacteristic); multi && mc.MaxValues() > 1 && mc.Values(req, s) > 1 {
		return out, false
	}
	return out, true
}

// MatchIndex returns m's index in s.Matches, -1 when it is not one of
// them: what a marker queued for a match records of it (ban's checks,
// known_visitors' markers).
func MatchIndex(s *rules.Scratch, m *rules.Match) int {
	for i := range s.Matches {
		if &s.Matches[i] == m {
			return i
		}
	}
	return -1
}
