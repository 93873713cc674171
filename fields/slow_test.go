package fields

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Slow references for the fuzzers: each origin parser's reading of a form
// name, written out from its own source (php_register_variable_ex, Rack
// 2.2's normalize_params, qs 6's parseKeys) with strings and regular
// expressions, and the readings of a form body, a query string and a
// Cookie header built from them. Segment "" is an array append.

// slowFlatSegs is Go's, Django's, Flask's and Node's querystring reading.
func slowFlatSegs(k string) []string {
	if k == "" {
		return nil
	}
	return []string{k}
}

var phpRenamer = strings.NewReplacer(" ", "_", ".", "_")

// slowPHPSegs is php_register_variable_ex.
func slowPHPSegs(k string) []string {
	if i := strings.IndexByte(k, 0); i >= 0 {
		k = k[:i]
	}
	k = strings.TrimLeft(k, " ")
	b := strings.IndexByte(k, '[')
	if b < 0 {
		if k == "" {
			return nil
		}
		return []string{phpRenamer.Replace(k)}
	}
	if !strings.Contains(k[b+1:], "]") {
		// An unclosed '[' is '_', and so is every ' ', '.' and '[' after.
		return []string{phpRenamer.Replace(k[:b]) + "_" + strings.NewReplacer(" ", "_", ".", "_", "[", "_").Replace(k[b+1:])}
	}
	if b == 0 {
		return nil // an empty variable name
	}
	segs := []string{phpRenamer.Replace(k[:b])}
	for rest := k[b:]; strings.HasPrefix(rest, "["); {
		j := strings.IndexByte(rest, ']')
		if j < 0 {
			break
		}
		segs = append(segs, rest[1:j])
		rest = rest[j+1:]
	}
	return segs
}

// rackNameRE is normalize_params' %r(\A[\[\]]*([^\[\]]+)\]*).
var rackNameRE = regexp.MustCompile(`^[\[\]]*([^\[\]]+)\]*`)

// slowRackSegs is Rack 2.2's normalize_params, after the leading spaces
// the edge drops as Rack's "[&] *" separator does.
func slowRackSegs(name string) []string {
	name = strings.TrimLeft(name, " ")
	var segs []string
	for depth := 0; ; depth++ {
		k, after := "", ""
		if m := rackNameRE.FindStringSubmatchIndex(name); m != nil {
			k, after = name[m[2]:m[3]], name[m[1]:]
		}
		switch {
		case k == "" && depth == 0:
			return nil
		case k == "":
			return append(segs, "")
		case after == "":
			return append(segs, k)
		case after == "[":
			return append(segs, name)
		case after == "[]":
			return append(segs, k, "")
		case strings.HasPrefix(after, "[]"):
			return append(segs, k, "", "[]…")
		}
		segs = append(segs, k)
		name = after
	}
}

// qsBracketsRE is parseKeys' /(\[[^[\]]*])/.
var qsBracketsRE = regexp.MustCompile(`\[[^\[\]]*\]`)

// slowQSSegs is qs 6's parseKeys and parseObject's cleanRoot, depth
// unbounded (as body-parser sets it).
func slowQSSegs(key string) []string {
	parent := key
	if loc := qsBracketsRE.FindStringIndex(key); loc != nil {
		parent = key[:loc[0]]
	}
	var keys []string
	if parent != "" {
		keys = append(keys, parent)
	}
	keys = append(keys, qsBracketsRE.FindAllString(key, -1)...)
	for i, k := range keys {
		if len(k) >= 2 && k[0] == '[' && k[len(k)-1] == ']' {
			keys[i] = k[1 : len(k)-1]
		}
	}
	if len(keys) == 0 || parent == "" && keys[0] == "" {
		return nil
	}
	return keys
}

// slowRelate compares a reading's segments with the target's.
func slowRelate(s, t []string) keyMatch {
	if len(s) == 0 || len(t) == 0 {
		return keyOther
	}
	for i := range min(len(s), len(t)) {
		if s[i] == "" || t[i] == "" {
			return keyArray
		}
		if s[i] != t[i] {
			return keyOther
		}
	}
	if len(s) == len(t) {
		return keyFlat
	}
	return keyArray
}

// slowMatch is a decoded key's reading by the parsers of rd, against the
// plain target path (a form name or a one-segment json: path is one
// segment; the flat parsers never read a deeper path).
func slowMatch(key string, path []string, rd reader) keyMatch {
	var out keyMatch
	for _, r := range []struct {
		r    reader
		segs func(string) []string
	}{{readFlat, slowFlatSegs}, {readPHP, slowPHPSegs}, {readRack, slowRackSegs}, {readQS, slowQSSegs}} {
		if rd&r.r == 0 || r.r == readFlat && len(path) > 1 {
			continue
		}
		switch slowRelate(r.segs(key), path) {
		case keyArray:
			return keyArray
		case keyFlat:
			out = keyFlat
		}
	}
	return out
}

// slowReading is one reading of a pair: its raw name and value, and the
// parsers that read it so.
type slowReading struct {
	k, v string
	rd   reader
}

// slowReadings are every reading of form-encoded text: each '&'-pair at
// its first '=' by every parser, at a "]=" after that by qs, and each of
// its ';'-parts by Rack's query parser and old Pythons.
func slowReadings(text string) []slowReading {
	var out []slowReading
	for _, pair := range strings.Split(text, "&") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		out = append(out, slowReading{k, v, readAll})
		if ok {
			if j := strings.Index(pair[len(k):], "]="); j >= 0 {
				qe := len(k) + j + 1
				out = append(out, slowReading{pair[:qe], pair[qe+1:], readQS})
			}
		}
		if strings.Contains(pair, ";") {
			for _, part := range strings.Split(pair, ";") {
				k, v, _ := strings.Cut(part, "=")
				out = append(out, slowReading{k, v, readFlat | readRack})
			}
		}
	}
	return out
}

// slowUnescape is url.QueryUnescape.
func slowUnescape(s string) (string, bool) {
	u, err := url.QueryUnescape(s)
	return u, err == nil
}

// slowFormVerdict is what FormField must answer for a plain name: whether
// a bad escape is anywhere, whether the readings that name the field
// disagree or make it an array, whether one of their values is not UTF-8
// or holds a NUL, and the value they agree on.
type slowFormVerdict struct {
	badEscape, conflict, badValue, found bool
	value                                string
}

func slowFormField(body, name string) slowFormVerdict {
	var out slowFormVerdict
	path := []string{name}
	for _, r := range slowReadings(body) {
		k, ok1 := slowUnescape(r.k)
		v, ok2 := slowUnescape(r.v)
		if !ok1 || !ok2 {
			out.badEscape = true
			continue
		}
		switch slowMatch(k, path, r.rd) {
		case keyArray:
			out.conflict = true
		case keyFlat:
			if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				out.badValue = true
			}
			switch {
			case !out.found:
				out.value, out.found = v, true
			case v != out.value:
				out.conflict = true
			}
		}
	}
	return out
}

// slowLenient is PHP's urldecode: a bad escape stays as text.
// slowIsHex is a hexadecimal digit, for the slow references.
func slowIsHex(c byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0 }

func slowLenient(s string, plus bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+' && plus:
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && slowIsHex(s[i+1]) && slowIsHex(s[i+2]):
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// slowCheckMerged is what CheckMerged must answer for path (one plain
// segment, or a plain json: path).
func slowCheckMerged(query, cookies string, path []string, value string, found bool) error {
	var qvals []string
	conflict := false
	for _, r := range slowReadings(query) {
		k, ok := slowUnescape(r.k)
		if !ok {
			if slowMatch(slowLenient(r.k, true), path, r.rd) != keyOther {
				conflict = true
			}
			continue
		}
		switch slowMatch(k, path, r.rd) {
		case keyArray:
			conflict = true
		case keyFlat:
			v, ok := slowUnescape(r.v)
			if !ok {
				conflict = true
			}
			qvals = append(qvals, v)
		}
	}
	var cvals []string
	for _, part := range strings.Split(cookies, ";") {
		part = strings.TrimLeft(part, " \t\n\v\f\r")
		k, v, _ := strings.Cut(part, "=")
		if k == "" {
			continue
		}
		switch slowMatch(k, path, readPHP) {
		case keyArray:
			conflict = true
		case keyFlat:
			cvals = append(cvals, slowLenient(v, false))
		}
	}
	if conflict {
		return ErrMerged
	}
	want, have := value, found
	if !found && len(qvals) > 0 {
		want, have = qvals[0], true
	}
	for _, v := range append(qvals, cvals...) {
		if !have || v != want {
			return ErrMerged
		}
	}
	if !found && len(qvals) > 0 {
		return ErrOnlyInQuery
	}
	return nil
}

// slowJSONEscapesBad reports whether a valid JSON document holds a \u
// escape of NUL or of a surrogate that is not a high one followed at once
// by a low one.
func slowJSONEscapesBad(doc string) bool {
	in := false
	var runes []rune // the \u escapes of the current string, -1 between
	check := func() bool {
		for i := 0; i < len(runes); i++ {
			r := runes[i]
			switch {
			case r == 0, 0xDC00 <= r && r <= 0xDFFF:
				return true
			case 0xD800 <= r && r <= 0xDBFF:
				if i+1 == len(runes) || runes[i+1] < 0xDC00 || runes[i+1] > 0xDFFF {
					return true
				}
				i++
			}
		}
		return false
	}
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case !in && c == '"':
			in, runes = true, runes[:0]
		case in && c == '"':
			if check() {
				return true
			}
			in = false
		case in && c == '\\' && doc[i+1] == 'u':
			r, _ := strconv.ParseUint(doc[i+2:i+6], 16, 32)
			runes = append(runes, rune(r))
			i += 5
		case in && c == '\\':
			runes = append(runes, -1)
			i++
		case in:
			runes = append(runes, -1)
		}
	}
	return false
}
