//go:build !race

package route

import "testing"

// The race detector's instrumentation allocates, so this guard only runs
// without it.
func TestPathNoAllocs(t *testing.T) {
	raw := []byte("//api/./v1/%6Cogin/../login;jsessionid=x/%2F%c3%a9/.git./x%20")
	canon, match := make([]byte, 0, 256), make([]byte, 0, 256)
	got := testing.AllocsPerRun(100, func() {
		canon, _ = AppendCanonicalPath(canon[:0], raw)
		match = AppendMatchPath(match[:0], canon, true)
	})
	if got != 0 {
		t.Errorf("AppendCanonicalPath and AppendMatchPath: got %v allocs per run, want 0", got)
	}
}

func TestHostNoAllocs(t *testing.T) {
	hosts := [][]byte{[]byte("LOGIN.example.com.:0443"), []byte("[0:0::1]:80"), []byte("[::ffff:192.0.2.1]"), []byte("127.0.0.1")}
	authority, name := make([]byte, 0, 64), make([]byte, 0, 64)
	got := testing.AllocsPerRun(100, func() {
		for _, h := range hosts {
			authority, name, _ = AppendHost(authority[:0], name[:0], h)
		}
	})
	if got != 0 {
		t.Errorf("AppendHost: got %v allocs per run, want 0", got)
	}
}

func TestMatchNoAllocs(t *testing.T) {
	m := Matcher{methods: []string{"GET"}, exact: []string{"/login"}, prefixes: []string{"/api/"}, hosts: []string{"example.com"}}
	method, overrides, path, host := []byte("PUT"), []byte("DELETE GET "), []byte("/api/v1"), []byte("example.com")
	got := testing.AllocsPerRun(100, func() {
		if !m.Match(method, overrides, path, host) {
			t.Fatal("no match")
		}
	})
	if got != 0 {
		t.Errorf("Match: got %v allocs per run, want 0", got)
	}
}
