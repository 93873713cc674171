package fields

import (
	"bytes"
	"unicode/utf8"

	"github.com/edge-gateway/edge/internal/httpsyntax"
)

// FormField reads the field name of an application/x-www-form-urlencoded
// body the way origins' parsers read it, so the edge and the origin never
// disagree about which value a request names (docs/body-identities.md §5).
//
// Pairs are separated by '&' (as Go since 1.17, PHP, Express, Rack's body
// parser and Python since 3.10 separate them); '+' is a space and %XX a
// byte. A bad percent escape anywhere in the body is ErrMalformed: Go's
// ParseForm drops the pair, PHP keeps the '%' as text, Rack fails. A pair
// without '=' has the empty value. Names are compared exactly
// (case-sensitive), after decoding.
//
// Origins disagree about duplicates: Go's FormValue takes the first, PHP
// and Rack the last, Express makes an array. So every pair that names the
// field must carry the same value, or err is ErrAmbiguous. A pair names
// the field when any origin's parser files it under name:
//
//   - Go, Django, Flask and Node's querystring: the decoded name itself;
//   - PHP (php_register_variable_ex): leading spaces dropped, the name cut
//     at a NUL, ' ' and '.' turned into '_' up to the first '[' (so
//     "challenge.id" is challenge_id), an unclosed '[' turned into '_'
//     with every ' ', '.' and '[' after it;
//   - Rack 2 (Rails): leading '[' and ']' dropped and the name cut at the
//     next bracket ("[phone]", "phone]" and "]]phone" are phone);
//   - Node's qs (Express): the text before the first "[...]" group, and
//     each group ("[phone]" is phone); qs also ends a name at "]=" when
//     that comes after the first '=' ("a=b]=c" is the name "a=b]");
//   - Rack's query parser and Python before 3.10 also split pairs at ';',
//     so a raw ';' in a pair that names the field is ErrAmbiguous.
//
// A name that one of them reads as an array or a map ("phone[]",
// "phone[0]", "phone[x]", "[phone][x]") is ErrAmbiguous: the origin sees
// no string there, the edge must not pick one.
//
// The value is returned decoded; one that is not valid UTF-8 or holds a
// NUL is ErrMalformed (Express keeps a bad escape as its text, Go and PHP
// turn it into bytes; C code cuts a string at a NUL). The work is linear
// in len(body).
func FormField(body []byte, name string) (value string, found bool, err error) {
	var t target
	t.setName(name)
	var kbuf, vbuf, dbuf [128]byte
	sc, err := scanForm(formScan{strict: true}, &t, body, formBufs{kbuf[:0], vbuf[:0], dbuf[:0]})
	switch {
	case err != nil:
		return "", false, err
	case sc.conflict:
		return "", false, ErrAmbiguous
	case !sc.found:
		return "", false, nil
	}
	return string(sc.val), true, nil
}

// QueryField reads the parameter name of a raw query string (without the
// '?') exactly as FormField reads a form body: origins parse both with the
// same code.
func QueryField(rawQuery []byte, name string) (value string, found bool, err error) {
	return FormField(rawQuery, name)
}

type keyMatch uint8

const (
	keyOther keyMatch = iota // names another field
	keyFlat                  // names the field
	keyArray                 // names the field as an array or a map, or a parent or child of it
)

// reader is a set of origin parsers that read a form name.
type reader uint8

const (
	readFlat reader = 1 << iota // Go, Django, Flask, Node's querystring: the decoded name
	readPHP                     // PHP's php_register_variable_ex
	readRack                    // Rack 2's normalize_params (Rails)
	readQS                      // Node's qs (Express's extended parsers)
	readAll  = readFlat | readPHP | readRack | readQS
	nReaders = 4
)

// maxNameSegs bounds the segments of a name the readers keep: a json:
// path's and one more, so a deeper name is still seen to extend the path.
const maxNameSegs = MaxPathSegments + 1

// nameSeg is one segment of a name as a reader files it: name[lo:hi].
type nameSeg struct {
	lo, hi int32
	wild   bool  // an empty index ("[]"): an array append
	mangle uint8 // PHP's renaming: 1 ' ' and '.' read as '_', 2 '[' too
}

// nameSegs is a name as a reader files it: n segments, more when it had
// more than maxNameSegs.
type nameSegs struct {
	n    int
	more bool
	s    [maxNameSegs]nameSeg
}

func (ns *nameSegs) add(lo, hi int, wild bool, mangle uint8) {
	if ns.n == maxNameSegs {
		ns.more = true
		return
	}
	ns.s[ns.n] = nameSeg{lo: int32(lo), hi: int32(hi), wild: wild, mangle: mangle}
	ns.n++
}

// target is the field a source names, as each reader files it: a form
// name (form:NAME, and the query or cookie spelling of a one-segment
// json: path) or a json: path, whose query spelling is a[b][c].
type target struct {
	// name is the form name; its segments index it. For a json: path,
	// path[i] is segment i's text.
	name string
	path []string
	// plain: name is one segment with no byte any reader treats
	// specially, so a plain key matches it exactly.
	plain bool
	// segs[r] is the target as reader 1<<r reads it; built on first use
	// for a plain name.
	segs  [nReaders]nameSegs
	built bool
	// first[c]: some reader's first segment of the target starts with c
	// (or with a byte PHP renames to c); see mayName.
	first    [256]bool
	hasFirst bool
}

// setName makes t the form name name.
func (t *target) setName(name string) {
	t.name, t.plain = name, isPlainName(name)
}

// setPath makes t the json: path, as the readers that nest names read
// it; the flat reader reads only a one-segment path.
func (t *target) setPath(path []string) {
	if len(path) == 1 {
		t.setName(path[0])
		return
	}
	t.path, t.built = path, true
	for r := range nReaders {
		ns := &t.segs[r]
		if reader(1)<<r == readFlat {
			continue
		}
		for i, p := range path {
			var m uint8
			if i == 0 && reader(1)<<r == readPHP {
				m = 1
			}
			ns.add(0, len(p), false, m)
		}
	}
}

// build reads the form name by every reader.
func (t *target) build() {
	t.built = true
	for r := range nReaders {
		readName(reader(1)<<r, t.name, &t.segs[r])
	}
}

// mayName reports whether a raw (undecoded) key could name the target to
// any reader, from its first byte after raw spaces: every reader's first
// segment starts there or after a '[' or ']' (Rack, qs) or a decoded
// space (PHP), so a key that starts with another byte than the target's
// names another field and need not be decoded.
func (t *target) mayName(raw []byte) bool {
	if !t.hasFirst {
		t.hasFirst = true
		if !t.built {
			t.build()
		}
		for r := range nReaders {
			ns := &t.segs[r]
			if ns.n == 0 || ns.s[0].hi == ns.s[0].lo {
				continue
			}
			c := t.text(0)[ns.s[0].lo]
			t.first[c] = true
			if ns.s[0].mangle >= 1 && (c == '_' || c == ' ' || c == '.' || c == '[') {
				t.first['_'], t.first[' '], t.first['.'] = true, true, true
			}
		}
	}
	for len(raw) > 0 && raw[0] == ' ' {
		raw = raw[1:]
	}
	if len(raw) == 0 {
		return false
	}
	switch c := raw[0]; c {
	case '[', ']', '%', '+':
		return true
	default:
		return t.first[c]
	}
}

// text is the string segment i of the target indexes.
func (t *target) text(i int) string {
	if t.path != nil {
		return t.path[i]
	}
	return t.name
}

// match tells whether the decoded key names t to any reader of rd: an
// array reading wins over a flat one.
func (t *target) match(key []byte, rd reader) keyMatch {
	if t.plain && isPlainKey(key) {
		// Every reader reads both as themselves.
		if string(key) == t.name {
			return keyFlat
		}
		return keyOther
	}
	if !t.built {
		t.build()
	}
	var ks nameSegs
	flat := false
	for r := range nReaders {
		if rd&(1<<r) == 0 {
			continue
		}
		readName(reader(1)<<r, key, &ks)
		switch t.relate(key, &ks, &t.segs[r]) {
		case keyArray:
			return keyArray
		case keyFlat:
			flat = true
		}
	}
	if flat {
		return keyFlat
	}
	return keyOther
}

// relate compares a key's segments with the target's: equal is keyFlat, one
// a prefix of the other (or equal up to an array index) keyArray.
func (t *target) relate(key []byte, ks, ts *nameSegs) keyMatch {
	if ks.n == 0 || ts.n == 0 {
		return keyOther
	}
	for i := range min(ks.n, ts.n) {
		k, s := ks.s[i], ts.s[i]
		if k.wild || s.wild {
			return keyArray
		}
		if !segEqual(key[k.lo:k.hi], k.mangle, t.text(i)[s.lo:s.hi], s.mangle) {
			return keyOther
		}
	}
	if ks.n == ts.n && !ks.more && !ts.more {
		return keyFlat
	}
	return keyArray
}

// segEqual compares two segments, each renamed as PHP renames it by its
// mangle level.
func segEqual(a []byte, am uint8, b string, bm uint8) bool {
	if len(a) != len(b) {
		return false
	}
	if am == 0 && bm == 0 {
		return string(a) == b
	}
	for i := range len(a) {
		if phpRename(a[i], am) != phpRename(b[i], bm) {
			return false
		}
	}
	return true
}

func phpRename(c, m uint8) byte {
	switch {
	case m >= 1 && (c == ' ' || c == '.'):
		return '_'
	case m == 2 && c == '[':
		return '_'
	}
	return c
}

// specialNameByte[c] is true for the bytes some reader treats specially
// in a name: brackets, '.', ' ' and NUL.
var specialNameByte = func() (t [256]bool) {
	for _, c := range []byte("[]. \x00") {
		t[c] = true
	}
	return t
}()

func isPlainKey(k []byte) bool {
	for _, c := range k {
		if specialNameByte[c] {
			return false
		}
	}
	return true
}

func isPlainName(k string) bool {
	for i := 0; i < len(k); i++ {
		if specialNameByte[k[i]] {
			return false
		}
	}
	return true
}

// readName splits a decoded name into the segments reader r files it
// under; n is 0 when r ignores the name.
func readName[T ~string | ~[]byte](r reader, k T, ns *nameSegs) {
	*ns = nameSegs{}
	switch r {
	case readFlat:
		if len(k) > 0 {
			ns.add(0, len(k), false, 0)
		}
	case readPHP:
		phpName(k, ns)
	case readRack:
		rackName(k, ns)
	case readQS:
		qsName(k, ns)
	}
}

// phpName is php_register_variable_ex (PHP 8): leading spaces dropped,
// the name cut at a NUL; up to the first '[' with a ']' after it, ' ' and
// '.' read as '_' (an unclosed first '[' reads as '_' with every ' ', '.'
// and '[' after it); then each "[index]" up to its first ']', while the
// next one follows at once ("a[b]x[c]" is a[b]; "a[b][c" is a[b]). An
// empty base name is ignored.
func phpName[T ~string | ~[]byte](k T, ns *nameSegs) {
	end := len(k)
	for i := 0; i < end; i++ {
		if k[i] == 0 {
			end = i
		}
	}
	i := 0
	for i < end && k[i] == ' ' {
		i++
	}
	b := -1
	for j := i; j < end; j++ {
		if k[j] == '[' {
			b = j
			break
		}
	}
	if b < 0 || indexByteFrom(k, ']', b+1, end) < 0 {
		if i < end {
			m := uint8(1)
			if b >= 0 {
				m = 2
			}
			ns.add(i, end, false, m)
		}
		return
	}
	if b == i {
		return
	}
	ns.add(i, b, false, 1)
	for p := b; p < end && k[p] == '['; {
		q := indexByteFrom(k, ']', p+1, end)
		if q < 0 {
			return
		}
		ns.add(p+1, q, q == p+1, 0)
		p = q + 1
	}
}

// rackName is Rack 2.2's normalize_params: at each level, leading '[' and
// ']' dropped, the name is the run up to the next bracket, then ']'s are
// dropped; nothing after is a plain name, "[" keeps the level's whole
// name, "[]" and "[]..." make an array, anything else is the next level.
// Leading spaces are dropped too (Rack's separator takes the spaces after
// it). An empty top-level name is ignored.
func rackName[T ~string | ~[]byte](k T, ns *nameSegs) {
	pos := 0
	for pos < len(k) && k[pos] == ' ' {
		pos++
	}
	for level := 0; ; level++ {
		i := pos
		for i < len(k) && (k[i] == '[' || k[i] == ']') {
			i++
		}
		j := i
		for j < len(k) && k[j] != '[' && k[j] != ']' {
			j++
		}
		if j == i {
			if level > 0 {
				ns.add(i, i, true, 0)
			}
			return
		}
		m := j
		for m < len(k) && k[m] == ']' {
			m++
		}
		rest := len(k) - m
		switch {
		case rest == 0:
			ns.add(i, j, false, 0)
			return
		case rest == 1 && k[m] == '[':
			ns.add(pos, len(k), false, 0)
			return
		case rest >= 2 && k[m] == '[' && k[m+1] == ']':
			ns.add(i, j, false, 0)
			ns.add(m, m, true, 0)
			ns.more = ns.more || rest > 2
			return
		}
		ns.add(i, j, false, 0)
		if ns.more {
			return
		}
		pos = m
	}
}

// qsName is qs 6's parseKeys: the text before the first "[...]" group
// (a '[', no bracket, a ']') is the parent, then every group after it,
// each without its brackets ("[]" an array). Its depth is unbounded, as
// body-parser sets it. A name that is only "[]" is ignored.
func qsName[T ~string | ~[]byte](k T, ns *nameSegs) {
	g, h := qsGroup(k, 0)
	if g < 0 {
		if len(k) > 0 {
			ns.add(0, len(k), false, 0)
		}
		return
	}
	if g > 0 {
		ns.add(0, g, false, 0)
	} else if h == g+1 {
		return
	}
	for g >= 0 && !ns.more {
		ns.add(g+1, h, h == g+1, 0)
		g, h = qsGroup(k, h+1)
	}
}

// qsGroup finds the first "[...]" group at or after from: the index of
// its '[' and of its ']', or -1.
func qsGroup[T ~string | ~[]byte](k T, from int) (int, int) {
	open := -1
	for i := from; i < len(k); i++ {
		switch k[i] {
		case '[':
			open = i
		case ']':
			if open >= 0 {
				return open, i
			}
		}
	}
	return -1, -1
}

func indexByteFrom[T ~string | ~[]byte](k T, c byte, from, end int) int {
	for i := from; i < end; i++ {
		if k[i] == c {
			return i
		}
	}
	return -1
}

// formScan is what the readings of form-encoded text filed under one
// target so far: the value all of them agree on, or a conflict. It is
// passed and returned by value, and its scratch buffers are the caller's,
// so that nothing escapes to the heap.
type formScan struct {
	// strict: a bad escape anywhere is ErrMalformed, and a value that is
	// not UTF-8 or holds a NUL too (a body or a query: source). Otherwise
	// (the query and cookies of a body source) only the readings that
	// name the target matter, and a bad escape there is a conflict.
	strict bool
	// seeded: val and found were set before the scan (the body's reading),
	// and a reading that names the target must agree with them.
	seeded   bool
	val      []byte
	found    bool
	conflict bool
}

// formBufs are a scan's scratch buffers: the decoded key, the first
// value found, and each later one.
type formBufs struct {
	k, v, d []byte
}

// scanForm reads text as application/x-www-form-urlencoded pairs (a body
// or a query string).
func scanForm(sc formScan, t *target, text []byte, b formBufs) (formScan, error) {
	var err error
	for len(text) > 0 {
		var pair []byte
		if i := bytes.IndexByte(text, '&'); i >= 0 {
			pair, text = text[:i], text[i+1:]
		} else {
			pair, text = text, nil
		}
		if len(pair) == 0 {
			continue
		}
		eq := bytes.IndexByte(pair, '=')
		k, v := pair, []byte(nil)
		if eq >= 0 {
			k, v = pair[:eq], pair[eq+1:]
		}
		if sc, b.k, err = reading(sc, t, b, k, v, readAll); err != nil {
			return sc, err
		}
		// qs ends the name at "]=" when that comes after the first '='.
		if eq >= 0 {
			if j := bytes.Index(pair[eq:], []byte("]=")); j >= 0 {
				qe := eq + j + 1
				if sc, b.k, err = reading(sc, t, b, pair[:qe], pair[qe+1:], readQS); err != nil {
					return sc, err
				}
			}
		}
		// Rack's query parser and Python before 3.10 split at ';' too.
		if bytes.IndexByte(pair, ';') >= 0 {
			for rest := pair; len(rest) > 0; {
				var part []byte
				if i := bytes.IndexByte(rest, ';'); i >= 0 {
					part, rest = rest[:i], rest[i+1:]
				} else {
					part, rest = rest, nil
				}
				k, v, _ := bytes.Cut(part, []byte{'='})
				if sc, b.k, err = reading(sc, t, b, k, v, readFlat|readRack); err != nil {
					return sc, err
				}
			}
		}
	}
	return sc, nil
}

// reading takes one reading of a pair: its raw key and value, for the
// readers rd. It returns the key buffer for reuse.
func reading(sc formScan, t *target, b formBufs, k, v []byte, rd reader) (formScan, []byte, error) {
	if !sc.strict && !t.mayName(k) {
		return sc, b.k, nil // nothing to check in another field
	}
	kb, ok := appendUnescaped(b.k[:0], k)
	if !ok {
		if sc.strict {
			return sc, kb, ErrMalformed
		}
		// PHP and qs keep a bad escape as text, Go drops the pair, Rack
		// fails: if any of them could see the target here, they disagree.
		kb = appendLenient(kb[:0], k)
		if t.match(kb, rd) != keyOther {
			sc.conflict = true
		}
		return sc, kb, nil
	}
	m := t.match(kb, rd)
	if m == keyOther || sc.conflict {
		if sc.strict && !validEscapes(v) {
			return sc, kb, ErrMalformed
		}
		return sc, kb, nil
	}
	if m == keyArray {
		if sc.strict && !validEscapes(v) {
			return sc, kb, ErrMalformed
		}
		sc.conflict = true
		return sc, kb, nil
	}
	cur := b.d[:0]
	if !sc.found && !sc.seeded {
		cur = b.v[:0]
	}
	if cur, ok = appendUnescaped(cur, v); !ok {
		if sc.strict {
			return sc, kb, ErrMalformed
		}
		sc.conflict = true
		return sc, kb, nil
	}
	if sc.strict && (!utf8.Valid(cur) || bytes.IndexByte(cur, 0) >= 0) {
		return sc, kb, ErrMalformed
	}
	return sc.agree(cur), kb, nil
}

// agree records a value a reading files under the target.
func (sc formScan) agree(cur []byte) formScan {
	switch {
	case !sc.found && sc.seeded:
		sc.conflict = true // the body lacks what the query or a cookie says
	case !sc.found:
		sc.val, sc.found = cur, true
	case !bytes.Equal(sc.val, cur):
		sc.conflict = true
	}
	return sc
}

// scanCookies reads a Cookie header as PHP reads it into $_COOKIE (and
// $_REQUEST): pairs split at ';', leading white space dropped from a
// name, names not decoded, values raw-URL-decoded (%XX; '+' stays, a bad
// escape stays as text), and each name filed by php_register_variable_ex.
func scanCookies(sc formScan, t *target, cookies []byte, b formBufs) formScan {
	for len(cookies) > 0 && !sc.conflict {
		var part []byte
		if i := bytes.IndexByte(cookies, ';'); i >= 0 {
			part, cookies = cookies[:i], cookies[i+1:]
		} else {
			part, cookies = cookies, nil
		}
		for len(part) > 0 && isCSpace(part[0]) {
			part = part[1:]
		}
		k, v, _ := bytes.Cut(part, []byte{'='})
		if len(k) == 0 || !t.mayName(k) {
			continue
		}
		switch t.match(k, readPHP) {
		case keyArray:
			sc.conflict = true
		case keyFlat:
			sc = sc.agree(appendRawLenient(b.d[:0], v))
		}
	}
	return sc
}

// jsonFormView reads a JSON body as a form, as PHP's
// parse_str(file_get_contents('php://input')) reads any body whatever its
// type (docs/body-identities.md §4): every reading that names the field
// must agree with the JSON's value, and none may name it when the JSON
// lacks it. It reports whether they conflict.
func jsonFormView(body []byte, path []string, value string, found bool) bool {
	var t target
	t.setPath(path)
	var kbuf, vbuf, dbuf [128]byte
	sc := formScan{seeded: true, found: found, val: append(vbuf[:0], value...)}
	sc, _ = scanForm(sc, &t, body, formBufs{kbuf[:0], vbuf[:0], dbuf[:0]})
	return sc.conflict
}

// isCSpace is C's isspace.
func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// appendUnescaped appends the form-decoded s ('+' is a space, %XX a byte)
// to dst; ok is false for a '%' not followed by two hex digits.
func appendUnescaped(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			dst = append(dst, ' ')
		case '%':
			v, ok := httpsyntax.Unescape(s, i)
			if !ok {
				return dst, false
			}
			dst = append(dst, v)
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst, true
}

// appendLenient is appendUnescaped keeping a bad escape as text, as PHP's
// urldecode does.
func appendLenient(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			dst = append(dst, ' ')
		case c == '%':
			if v, ok := httpsyntax.Unescape(s, i); ok {
				dst = append(dst, v)
				i += 2
			} else {
				dst = append(dst, c)
			}
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendRawLenient is PHP's rawurldecode: %XX a byte, everything else
// (a '+', a bad escape) as it is.
func appendRawLenient(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		v, ok := byte(0), false
		if s[i] == '%' {
			v, ok = httpsyntax.Unescape(s, i)
		}
		if ok {
			dst = append(dst, v)
			i += 2
		} else {
			dst = append(dst, s[i])
		}
	}
	return dst
}

// validEscapes reports whether every '%' in s starts a %XX escape.
func validEscapes(s []byte) bool {
	for {
		i := bytes.IndexByte(s, '%')
		if i < 0 {
			return true
		}
		if _, ok := httpsyntax.Unescape(s, i); !ok {
			return false
		}
		s = s[i+3:]
	}
}
