package route

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendCanonicalPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		want string // "" when the path must be refused
	}{
		{"root", "/", "/"},
		{"plain", "/login", "/login"},
		{"trailing slash kept", "/login/", "/login/"},
		{"case kept", "/LOGIN", "/LOGIN"},
		{"leading double slash", "//login", "/login"},
		{"repeated slashes", "/api///v1//login//", "/api/v1/login/"},
		{"dot", "/./login", "/login"},
		{"dot last", "/login/.", "/login/"},
		{"dot dot", "/a/../login", "/login"},
		{"dot dot last", "/a/b/..", "/a/"},
		{"dot dot above root", "/../../login", "/login"},
		{"dot dot at root", "/..", "/"},
		{"encoded unreserved", "/%6Cogin", "/login"},
		{"encoded unreserved lower hex", "/%6cogin", "/login"},
		{"encoded unreserved all kinds", "/%41%7a%30%2D%2E%5F%7E", "/Az0-._~"},
		{"encoded dot dot", "/%2e%2e/login", "/login"},
		{"encoded dot dot mixed", "/a/.%2E/login", "/login"},
		{"encoded dot", "/%2E/login", "/login"},
		{"encoded slash kept", "/api%2Flogin", "/api%2Flogin"},
		{"encoded slash hex uppercased", "/login%2f", "/login%2F"},
		{"encoded other uppercased", "/a%3ab%c3%a9", "/a%3Ab%C3%A9"},
		{"encoded percent kept", "/%25", "/%25"},
		{"encoded control kept encoded", "/a%0Ab", "/a%0Ab"},
		{"dot dot with encoded slash is a name", "/a/..%2Flogin", "/a/..%2Flogin"},
		{"params kept", "/login;jsessionid=x", "/login;jsessionid=x"},
		{"backslash kept", "/a\\b", "/a\\b"},
		{"dots in names kept", "/a.../..b/.c", "/a.../..b/.c"},
		{"utf-8 kept", "/caf\xc3\xa9", "/caf\xc3\xa9"},
		{"space kept", "/a b", "/a b"},
		{"max length", "/" + strings.Repeat("a", maxRawPathLen-1), "/" + strings.Repeat("a", maxRawPathLen-1)},

		{"empty", "", ""},
		{"relative", "login", ""},
		{"relative dot", "./login", ""},
		{"asterisk", "*", ""},
		{"absolute form", "http://example.com/login", ""},
		{"invalid escape", "/%zz", ""},
		{"invalid escape one hex", "/%4g", ""},
		{"truncated escape", "/%4", ""},
		{"lone percent", "/%", ""},
		{"nul", "/login\x00", ""},
		{"encoded nul", "/login%00", ""},
		{"newline", "/login\n", ""},
		{"carriage return", "/a\rb", ""},
		{"tab", "/a\tb", ""},
		{"del", "/a\x7f", ""},
		{"overlong", "/" + strings.Repeat("a", maxRawPathLen), ""},

		// Segments of only dots and spaces, but "." and "..", are
		// refused: Windows origins strip them to nothing or to a dot
		// segment, others serve them as names.
		{"trailing dot kept", "/login.", "/login."},
		{"trailing dots and spaces kept", "/login.%20.", "/login.%20."},
		{"dot dot with params kept", "/..;/login", "/..;/login"},
		{"three dots", "/.../login", ""},
		{"three dots last", "/a/...", ""},
		{"encoded three dots", "/%2e%2E./login", ""},
		{"dot dot space", "/a/..%20/login", ""},
		{"dot space", "/x/.%20/login", ""},
		{"raw dot space", "/x/. /login", ""},
		{"space", "/%20/login", ""},
		{"raw space", "/ /login", ""},
		{"dots behind an encoded slash", "/x%2F...%2Flogin", ""},
		{"dots behind a backslash", "/x\\...\\login", ""},
		{"dots before params", "/x/...;a/login", ""},
		{"dots in params kept", "/x;.../login", "/x;.../login"},
		{"dot dot behind an encoded slash kept", "/x%2F..%2Flogin", "/x%2F..%2Flogin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := []byte("keep")
			got, ok := AppendCanonicalPath(prefix, []byte(tt.raw))
			if tt.want == "" {
				if ok || string(got) != "keep" {
					t.Fatalf("AppendCanonicalPath(%q) = %q, %v; want dst unchanged, false", tt.raw, got, ok)
				}
				return
			}
			if !ok || string(got) != "keep"+tt.want {
				t.Fatalf("AppendCanonicalPath(%q) = %q, %v; want %q, true", tt.raw, got, ok, "keep"+tt.want)
			}
		})
	}
}

func TestAppendMatchPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string // canonicalised first
		ci   bool
		want string
	}{
		{"root", "/", true, "/"},
		{"plain", "/login", true, "/login"},
		{"trailing slash dropped", "/login/", true, "/login"},
		{"double slash", "//login", true, "/login"},
		{"upper", "/LOGIN", true, "/login"},
		{"upper case-sensitive", "/LOGIN", false, "/LOGIN"},
		{"mixed case", "/LoGiN/", true, "/login"},
		{"dot", "/./login", true, "/login"},
		{"encoded unreserved", "/%6Cogin", true, "/login"},
		{"encoded upper unreserved", "/%4Cogin", true, "/login"},
		{"encoded upper unreserved case-sensitive", "/%4Cogin", false, "/Login"},
		{"dot dot", "/a/../login", true, "/login"},
		{"dot dot above root", "/../../login", true, "/login"},
		{"params", "/login;jsessionid=x", true, "/login"},
		{"params before slash", "/login;x=1/", true, "/login"},
		{"params mid path", "/api;v=1/login", true, "/api/login"},
		{"encoded params", "/login%3Bjsessionid=x", true, "/login"},
		{"params dot dot", "/admin/..;/login", true, "/login"},
		{"params only segment", "/;x/login", true, "/login"},
		{"encoded slash", "/api%2Flogin", true, "/api/login"},
		{"encoded slash lower", "/api%2flogin", true, "/api/login"},
		{"encoded backslash", "/api%5Clogin", true, "/api/login"},
		{"backslash", "/api\\login", true, "/api/login"},
		{"backslash dot dot", "/x\\..\\login", true, "/login"},
		{"encoded dot dot", "/%2e%2e/login", true, "/login"},
		{"encoded slash trailing", "/login%2F", true, "/login"},
		{"encoded slash dot dot", "/a/..%2Flogin", true, "/login"},
		{"encoded slash makes dot dot", "/x/a%2F..%2F..%2Flogin", true, "/login"},
		{"other escapes stay, hex upper", "/caf%c3%a9", true, "/caf%C3%A9"},
		{"escape hex not lowercased", "/A%3A", true, "/a%3A"},
		{"raw utf-8 written as its escapes", "/\xc3\x89", true, "/%C3%89"},
		{"raw and escaped utf-8 match alike", "/caf\xc3\xa9", true, "/caf%C3%A9"},
		{"dotted capital I folds (Go ToLower)", "/LOG%C4%B0N", true, "/login"},
		{"raw dotted capital I folds", "/LOG\xc4\xb0N", true, "/login"},
		{"dotless i folds (ToUpper)", "/log%C4%B1n", true, "/login"},
		{"long s folds", "/%C5%BFignup", true, "/signup"},
		{"kelvin sign folds", "/o%E2%84%AA", true, "/ok"},
		{"fullwidth letters fold", "/%EF%BC%AC%EF%BD%8F%EF%BD%87%EF%BD%89%EF%BD%8E", true, "/login"},
		{"fullwidth solidus is a separator", "/api%EF%BC%8F..%EF%BC%8Flogin", true, "/login"},
		{"invalid utf-8 stays escaped", "/a%C4", true, "/a%C4"},
		{"no folding when case-sensitive", "/LOG%C4%B0N", false, "/LOG%C4%B0N"},
		{"only slashes", "/////", true, "/"},
		{"only dots", "/./../.", true, "/"},
		{"trailing dot", "/login.", true, "/login"},
		{"trailing dots", "/login..", true, "/login"},
		{"encoded trailing dot", "/login%2E", true, "/login"},
		{"trailing space", "/login%20", true, "/login"},
		{"trailing dots and spaces", "/login.%20.%20", true, "/login"},
		{"trailing dot mid path", "/.git./config", true, "/.git/config"},
		{"trailing space mid path", "/.git%20/config", true, "/.git/config"},
		{"trailing dot before params", "/login.;x=1", true, "/login"},
		{"trailing dot before encoded slash", "/a.%2Fb", true, "/a/b"},
		{"trailing dot case-sensitive", "/Login.", false, "/Login"},
		{"leading dots kept", "/.htaccess", true, "/.htaccess"},
		{"inner dots and spaces kept", "/a..b/c%20d", true, "/a..b/c%20d"},
		{"fullwidth full stop folds and is stripped", "/login%EF%BC%8E", true, "/login"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			canon, ok := AppendCanonicalPath(nil, []byte(tt.raw))
			if !ok {
				t.Fatalf("AppendCanonicalPath(%q) refused it", tt.raw)
			}
			got := AppendMatchPath([]byte("keep"), canon, tt.ci)
			if string(got) != "keep"+tt.want {
				t.Fatalf("AppendMatchPath(%q, %v) = %q, want %q", canon, tt.ci, got, "keep"+tt.want)
			}
		})
	}
}

// TestMatchPathLogin lists spellings of /login that an origin may route to
// /login: every one must match /login.
func TestMatchPathLogin(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"/login", "/login/", "//login", "/LOGIN", "/Login//", "/./login", "/%6Cogin", "/%6c%6F%67%69%6E",
		"/a/../login", "/../../login", "/login;jsessionid=x", "/login;", "/%2e%2e/login", "/login%2F",
		"/foo/..;/login", "/foo%2F..%2Flogin", "/foo%5C..%5Clogin", "/foo\\..\\login", "/.%2E/login/.",
		"/login%3Bx", "/;/login", "/login/;x/", "/login/.;/",
		"/login.", "/login..", "/login%2E", "/login%20", "/LOGIN./", "/login. ", "/login.;x", "/x/../login.",
	} {
		canon, ok := AppendCanonicalPath(nil, []byte(raw))
		if !ok {
			t.Errorf("AppendCanonicalPath(%q) refused it", raw)
			continue
		}
		if got := AppendMatchPath(nil, canon, true); string(got) != "/login" {
			t.Errorf("match form of %q (canonical %q): got %q, want %q", raw, canon, got, "/login")
		}
	}
}

func BenchmarkCanonicalPath(b *testing.B) {
	for _, bc := range []struct{ name, raw string }{
		{"plain", "/api/v1/login"},
		{"messy", "//api/./v1/%6Cogin/../login;jsessionid=x/"},
	} {
		raw := []byte(bc.raw)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			canon, match := make([]byte, 0, 256), make([]byte, 0, 256)
			for b.Loop() {
				canon, _ = AppendCanonicalPath(canon[:0], raw)
				match = AppendMatchPath(match[:0], canon, true)
			}
		})
	}
}

// slowCanonicalPath is the reference for AppendCanonicalPath, written with
// strings.Split.
func slowCanonicalPath(raw string) (string, bool) {
	if !strings.HasPrefix(raw, "/") || len(raw) > maxRawPathLen {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c < 0x20 || c == 0x7f {
			return "", false
		}
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(raw) {
			return "", false
		}
		v, err := strconv.ParseUint(raw[i+1:i+3], 16, 8)
		if err != nil || v == 0 {
			return "", false
		}
		i += 2
		if slowPathUnreserved(byte(v)) {
			b.WriteByte(byte(v))
		} else {
			fmt.Fprintf(&b, "%%%02X", v)
		}
	}
	for _, seg := range strings.Split(b.String(), "/") {
		// The match form's segments: split at '\\', %2F and %5C too, each
		// up to its ';' (literal or %3B).
		seg = strings.NewReplacer("%2F", "/", "%5C", "/", "\\", "/", "%3B", ";").Replace(seg)
		for _, piece := range strings.Split(seg, "/") {
			piece, _, _ = strings.Cut(piece, ";")
			piece = strings.ReplaceAll(piece, "%20", " ")
			if piece != "" && piece != "." && piece != ".." && strings.Trim(piece, ". ") == "" {
				return "", false
			}
		}
	}
	segs := strings.Split(b.String()[1:], "/")
	var out []string
	trailing := false
	for i, s := range segs {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
			continue
		}
		trailing = i == len(segs)-1
	}
	if trailing && len(out) > 0 {
		return "/" + strings.Join(out, "/") + "/", true
	}
	return "/" + strings.Join(out, "/"), true
}

// slowMatchPath is the reference for AppendMatchPath.
func slowMatchPath(s string, ci bool) string {
	if ci {
		s = slowFold(s)
	}
	lower := func(c byte) byte {
		if ci && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				i += 2
				switch c := byte(v); {
				case c == '/', c == '\\':
					b.WriteByte('/')
				case c == ';', slowPathUnreserved(c):
					b.WriteByte(lower(c))
				default:
					fmt.Fprintf(&b, "%%%02X", c)
				}
				continue
			}
		}
		if c == '\\' {
			c = '/'
		}
		b.WriteByte(lower(c))
	}
	var out []string
	for _, seg := range strings.Split(b.String(), "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if seg != "." && seg != ".." {
			// Windows strips a segment's trailing dots and spaces.
			for trimmed := ""; trimmed != seg; {
				trimmed = seg
				seg = strings.TrimSuffix(strings.TrimRight(seg, ". "), "%20")
			}
		}
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	return "/" + strings.Join(out, "/")
}

func slowPathUnreserved(c byte) bool {
	return strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", c) >= 0
}

// slowFold is the reference of appendFolded: split s into ASCII bytes,
// ASCII escapes (kept as written) and high bytes (raw or escaped); decode
// each run of high bytes rune by rune; a valid rune that strings.ToLower,
// or strings.ToUpper then ToLower, or the fullwidth-to-ASCII shift turns
// into one ASCII byte becomes that byte; everything else is escaped.
func slowFold(s string) string {
	type unit struct {
		text string // ASCII byte or escape, as written
		high byte   // a byte >= 0x80, when text is ""
	}
	var units []unit
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil && v >= 0x80 {
				units = append(units, unit{high: byte(v)})
				i += 2
				continue
			}
		}
		if s[i] >= 0x80 {
			units = append(units, unit{high: s[i]})
			continue
		}
		units = append(units, unit{text: s[i : i+1]})
	}
	asciiOf := func(r rune) (byte, bool) {
		if r >= 0xFF01 && r <= 0xFF5E {
			r -= 0xFEE0
		}
		for _, f := range []string{strings.ToLower(string(r)), strings.ToLower(strings.ToUpper(string(r)))} {
			if len(f) == 1 && f[0] < 0x80 {
				return f[0], true
			}
		}
		return 0, false
	}
	var b strings.Builder
	for i := 0; i < len(units); {
		if units[i].text != "" {
			b.WriteString(units[i].text)
			i++
			continue
		}
		var run []byte
		for j := i; j < len(units) && units[j].text == ""; j++ {
			run = append(run, units[j].high)
		}
		r, size := utf8.DecodeRune(run)
		if c, ok := asciiOf(r); ok && r != utf8.RuneError {
			b.WriteByte(c)
		} else {
			for _, x := range run[:size] {
				fmt.Fprintf(&b, "%%%02X", x)
			}
		}
		i += size
	}
	return b.String()
}
