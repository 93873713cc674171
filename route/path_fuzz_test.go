package route

import (
	"bytes"
	"strings"
	"testing"
)

func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{
		"/", "/login", "/login/", "//login", "/LOGIN", "/./login", "/%6Cogin", "/a/../login",
		"/../../login", "/login;jsessionid=x", "/api%2Flogin", "/%2e%2e/login", "/login%2F",
		"/%zz", "/%4", "/login%00", "login", "/a\\..\\b", "/x/..;/login", "/a%2F..%2F..%2Fb",
		"/caf%c3%a9/", "/.%2e/./", "/%3b/%5c/",
		"/login.", "/login..", "/.git./config", "/login%2E", "/login%20", "/a/..%20/b", "/.../x", "/x%2F...%2Fy",
		"/login.;x", "/login%EF%BC%8E", "/a.%20.%20/",
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, ci bool) {
		// Any bytes go through the match form without a panic, as the
		// reference says.
		if got, want := AppendMatchPath(nil, raw, ci), slowMatchPath(string(raw), ci); string(got) != want {
			t.Fatalf("AppendMatchPath(%q, %v) = %q, want %q", raw, ci, got, want)
		}

		canon, ok := AppendCanonicalPath([]byte("dst"), raw)
		want, wantOK := slowCanonicalPath(string(raw))
		if ok != wantOK || ok && string(canon) != "dst"+want || !ok && string(canon) != "dst" {
			t.Fatalf("AppendCanonicalPath(%q) = %q, %v; want %q, %v", raw, canon, ok, want, wantOK)
		}
		if !ok {
			return
		}
		canon = canon[len("dst"):]
		if len(canon) > len(raw) {
			t.Fatalf("AppendCanonicalPath(%q) = %q: longer than its input", raw, canon)
		}
		checkPathShape(t, "canonical", raw, canon)
		again, ok := AppendCanonicalPath(nil, canon)
		if !ok || !bytes.Equal(again, canon) {
			t.Fatalf("AppendCanonicalPath(%q) = %q, %v; want it unchanged (canonical form of %q)", canon, again, ok, raw)
		}

		match := AppendMatchPath([]byte("dst"), canon, ci)[len("dst"):]
		if want := slowMatchPath(string(canon), ci); string(match) != want {
			t.Fatalf("AppendMatchPath(%q, %v) = %q, want %q", canon, ci, match, want)
		}
		if len(match) > 3*len(canon) {
			t.Fatalf("AppendMatchPath(%q) = %q: more than three times its input (raw UTF-8 is written escaped)", canon, match)
		}
		checkPathShape(t, "match", raw, match)
		if len(match) > 1 && match[len(match)-1] == '/' {
			t.Fatalf("match form of %q is %q: want no trailing slash", raw, match)
		}
		if again := AppendMatchPath(nil, match, ci); !bytes.Equal(again, match) {
			t.Fatalf("AppendMatchPath(%q) = %q; want it unchanged (match form of %q)", match, again, raw)
		}
	})
}

// checkPathShape fails unless p starts with '/' and has no empty, "." or
// ".." segment (a trailing slash aside).
func checkPathShape(t *testing.T, form string, raw, p []byte) {
	t.Helper()
	if len(p) == 0 || p[0] != '/' {
		t.Fatalf("%s form of %q is %q: want a leading '/'", form, raw, p)
	}
	s := string(p)
	for _, bad := range []string{"//", "/./", "/../"} {
		if strings.Contains(s, bad) {
			t.Fatalf("%s form of %q is %q: want no %q", form, raw, p, bad)
		}
	}
	if strings.HasSuffix(s, "/.") || strings.HasSuffix(s, "/..") {
		t.Fatalf("%s form of %q is %q: want no dot segment at the end", form, raw, p)
	}
}
