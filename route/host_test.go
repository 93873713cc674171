package route

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestAppendHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h               string
		name, authority string // "" when refused
	}{
		{"login.example.com", "login.example.com", "login.example.com"},
		{"LOGIN.Example.COM", "login.example.com", "login.example.com"},
		{"login.example.com.", "login.example.com", "login.example.com"},
		{"login.example.com:8080", "login.example.com", "login.example.com:8080"},
		{"login.example.com.:80", "login.example.com", "login.example.com:80"},
		{"login.example.com:", "login.example.com", "login.example.com"},
		{"login.example.com:0080", "login.example.com", "login.example.com:80"},
		{"login.example.com:0", "login.example.com", "login.example.com:0"},
		{"login.example.com:000", "login.example.com", "login.example.com:0"},
		{"login.example.com:65535", "login.example.com", "login.example.com:65535"},
		{"localhost", "localhost", "localhost"},
		{"my_service-1", "my_service-1", "my_service-1"},
		{"a1.b2", "a1.b2", "a1.b2"},
		{"0x.example", "0x.example", "0x.example"},
		{"1a", "1a", "1a"},
		{"127.0.0.1", "127.0.0.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1", "127.0.0.1"},
		{"127.0.0.1:8080", "127.0.0.1", "127.0.0.1:8080"},
		{"[::1]", "::1", "[::1]"},
		{"[0:0:0:0:0:0:0:1]", "::1", "[::1]"},
		{"[2001:DB8::A]:443", "2001:db8::a", "[2001:db8::a]:443"},
		{"[::ffff:192.0.2.1]", "192.0.2.1", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1", "192.0.2.1:80"},
		{"[64:ff9b::192.0.2.1]", "64:ff9b::c000:201", "[64:ff9b::c000:201]"},
		{strings.Repeat("a", 63) + ".com", strings.Repeat("a", 63) + ".com", strings.Repeat("a", 63) + ".com"},

		{"", "", ""},
		{".", "", ""},
		{":80", "", ""},
		{"login.example.com..", "", ""},
		{"login..example.com", "", ""},
		{".login.example.com", "", ""},
		{"login.example.com,other", "", ""},
		{"login.example.com other", "", ""},
		{"login%2eexample.com", "", ""},
		{"x@login.example.com", "", ""},
		{"l\xc3\xb6gin.example.com", "", ""},
		{"\xef\xbd\x8cogin.example.com", "", ""},
		{"login.example.com/x", "", ""},
		{"login.example.com:8a", "", ""},
		{"login.example.com:+80", "", ""},
		{"login.example.com:65536", "", ""},
		{"login.example.com:99999999999999999999", "", ""},
		{"a:b:c", "", ""},
		{"::1", "", ""},
		{"127.1", "", ""},
		{"0x7f.0.0.1", "", ""},
		{"0x7F000001", "", ""},
		{"2130706433", "", ""},
		{"127.0.0.01", "", ""},
		{"1.2.3.4.5", "", ""},
		{"256.0.0.1", "", ""},
		{"example.0x", "", ""},
		{"example.123", "", ""},
		{"[::1", "", ""},
		{"[::1]x", "", ""},
		{"[::1]:", "::1", "[::1]"},
		{"[::1]:99999", "", ""},
		{"[fe80::1%eth0]", "", ""},
		{"[127.0.0.1]", "", ""},
		{"[ ::1]", "", ""},
		{"[v1.x]", "", ""},
		{"[::g]", "", ""},
		{"[[::1]]", "", ""},
		{strings.Repeat("a", 64) + ".com", "", ""},
		{strings.Repeat("a.", 127) + "ab", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.h, func(t *testing.T) {
			t.Parallel()
			a, n, ok := AppendHost([]byte("A"), []byte("N"), []byte(tt.h))
			if tt.name == "" {
				if ok || string(a) != "A" || string(n) != "N" {
					t.Fatalf("AppendHost(%q) = %q, %q, %v; want it refused, dst unchanged", tt.h, a, n, ok)
				}
				return
			}
			if !ok || string(n) != "N"+tt.name || string(a) != "A"+tt.authority {
				t.Fatalf("AppendHost(%q) = %q, %q, %v; want %q, %q, true", tt.h, a[1:], n[1:], ok, tt.authority, tt.name)
			}
			// The authority forwarded is read back as itself: one spelling.
			if a2, n2, ok := AppendHost(nil, nil, a[1:]); !ok || string(a2) != tt.authority || string(n2) != tt.name {
				t.Fatalf("AppendHost(%q) = %q, %q, %v; want it unchanged", a[1:], a2, n2, ok)
			}
		})
	}
}

// TestAppendHostMaxLength: 253 bytes of name (a trailing dot aside) is the
// longest DNS name.
func TestAppendHostMaxLength(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("abcdefghi.", 25) + "abc" // 253 bytes
	for _, tt := range []struct {
		h  string
		ok bool
	}{{long, true}, {long + ".", true}, {long + "d", false}} {
		if _, _, ok := AppendHost(nil, nil, []byte(tt.h)); ok != tt.ok {
			t.Errorf("AppendHost(%d bytes) ok = %v, want %v", len(tt.h), ok, tt.ok)
		}
	}
}

func FuzzAppendHost(f *testing.F) {
	for _, s := range []string{
		"login.example.com", "LOGIN.example.com.:0080", "[::1]:80", "[::ffff:1.2.3.4]", "127.0.0.1", "127.1",
		"0x7f.1", "a..b", "[fe80::1%25x]", "x:", "", "[", "a_b-c.d",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, h []byte) {
		a, n, ok := AppendHost([]byte("A"), []byte("N"), h)
		wantA, wantN, wantOK := slowHost(string(h))
		if ok != wantOK || ok && (string(a) != "A"+wantA || string(n) != "N"+wantN) || !ok && (string(a) != "A" || string(n) != "N") {
			t.Fatalf("AppendHost(%q) = %q, %q, %v; want %q, %q, %v", h, a, n, ok, wantA, wantN, wantOK)
		}
		if !ok {
			return
		}
		if a2, n2, ok := AppendHost(nil, nil, a[1:]); !ok || string(a2) != wantA || string(n2) != wantN {
			t.Fatalf("AppendHost(%q) = %q, %q, %v; want it unchanged (from %q)", a[1:], a2, n2, ok, h)
		}
	})
}

// slowHost is the reference for AppendHost, written with strings and
// netip.
func slowHost(h string) (authority, name string, ok bool) {
	host, port, hasPort := h, "", false
	bracketed := strings.HasPrefix(h, "[")
	if bracketed {
		inner, rest, found := strings.Cut(h[1:], "]")
		if !found {
			return "", "", false
		}
		host = inner
		if rest != "" {
			if rest[0] != ':' {
				return "", "", false
			}
			port, hasPort = rest[1:], true
		}
	} else if i := strings.LastIndex(h, ":"); i >= 0 {
		host, port, hasPort = h[:i], h[i+1:], true
	}
	if hasPort && port != "" {
		if strings.Trim(port, "0123456789") != "" {
			return "", "", false
		}
		p := strings.TrimLeft(port, "0")
		if p == "" {
			p = "0"
		}
		if v, err := strconv.Atoi(p); err != nil || v > 65535 || len(p) > 5 {
			return "", "", false
		}
		port = p
	} else {
		hasPort = false
	}
	if bracketed {
		if !strings.Contains(host, ":") || strings.Trim(host, "0123456789abcdefABCDEF:.") != "" {
			return "", "", false
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return "", "", false
		}
		a = a.Unmap()
		name = a.String()
		authority = "[" + name + "]"
		if a.Is4() {
			authority = name
		}
	} else {
		host = strings.TrimSuffix(host, ".")
		if host == "" || len(host) > 253 {
			return "", "", false
		}
		labels := strings.Split(host, ".")
		for _, l := range labels {
			if l == "" || len(l) > 63 || strings.Trim(strings.ToLower(l), "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
				return "", "", false
			}
		}
		last := strings.ToLower(labels[len(labels)-1])
		number := strings.Trim(last, "0123456789") == ""
		if x, isHex := strings.CutPrefix(last, "0x"); isHex && strings.Trim(x, "0123456789abcdef") == "" {
			number = true
		}
		if number {
			if a, err := netip.ParseAddr(host); err != nil || !a.Is4() {
				return "", "", false
			}
		}
		name = strings.ToLower(host)
		authority = name
	}
	if hasPort {
		authority += ":" + port
	}
	return authority, name, true
}
