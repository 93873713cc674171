package ja4

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

type vector struct {
	name, want string
	records    []byte
}

func readVectors(t testing.TB) []vector {
	t.Helper()
	f, err := os.Open("testdata/foxio-vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []vector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			t.Fatalf("bad vector line %q", sc.Text())
		}
		b, err := hex.DecodeString(fs[3])
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, vector{name: fs[0] + "#" + fs[1], want: fs[2], records: b})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 30 {
		t.Fatalf("got %d vectors, want the 33 of testdata/README.md", len(vs))
	}
	return vs
}

// specDivergence is the one vector where the specification's ALPN rule
// and the reference's expected output differ (testdata/README.md).
var specDivergence = map[string]string{"tls-non-ascii-alpn.pcapng#0": "t13d1516bd_8daaf6152771_e5627efa2ab1"} // ALPN 0xba 0xad: "bd"

func TestFoxIOVectors(t *testing.T) {
	for _, v := range readVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			want := v.want
			if w, ok := specDivergence[v.name]; ok {
				if v.want[8:10] != "99" {
					t.Fatalf("the reference's value %s no longer prints 99: revisit specDivergence", v.want)
				}
				want = w
			}
			got, err := Records(nil, v.records)
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			if string(got) != want {
				t.Errorf("got %s, want %s", got, want)
			}
			if !Valid(got) {
				t.Errorf("Valid(%s) = false", got)
			}
			// The same through a Conn that reads the bytes in small pieces,
			// as a handshake over a slow network would.
			if fp := fingerprintThroughConn(v.records, 7); string(fp) != want {
				t.Errorf("through a Conn: got %s, want %s", fp, want)
			}
		})
	}
}

// TestRawMatchesReference checks the computation's intermediate strings,
// the reference's JA4_r form, on a vector whose c part has signature
// algorithms and one whose hello has none (c = twelve zeros).
func TestRawMatchesReference(t *testing.T) {
	tests := []struct {
		name    string
		records string
		rawB    string
		rawC    string
	}{
		{
			name: "tls-alpn-h2.pcap#0",
			rawB: "0004,0005,000a,0016,002f,0033,0035,0039,003c,003d,0041,0045,0067,006b,0081,0084,0088,009c,009d,009e,009f,00ba,00be,00c0,00c4,00ff,c007,c008,c009,c00a,c011,c012,c013,c014,c023,c024,c027,c028,c02b,c02c,c02f,c030,cca8,cca9,ccaa,ff85",
			rawC: "000a,000b,000d_0601,0603,efef,0501,0503,0401,0403,eeee,eded,0301,0303,0201,0203",
		},
	}
	vs := readVectors(t)
	for _, tt := range tests {
		i := slices.IndexFunc(vs, func(v vector) bool { return v.name == tt.name })
		if i < 0 {
			t.Fatalf("no vector %s", tt.name)
		}
		s := &scratch{}
		want, _ := scan(vs[i].records)
		if err := s.parse(vs[i].records[9 : 5+want]); err != nil {
			t.Fatal(err)
		}
		got := string(s.fingerprint(nil, false))
		if b := hash12(tt.rawB); got[11:23] != b {
			t.Errorf("b: got %s, want %s (sha256 of the reference's raw list)", got[11:23], b)
		}
		if c := hash12(tt.rawC); got[24:] != c {
			t.Errorf("c: got %s, want %s", got[24:], c)
		}
	}
}

func hash12(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:12]
}

func TestSpecExamples(t *testing.T) {
	// technical_details/JA4.md, "Cipher hash" and "Extension hash".
	if got := hash12("002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9"); got != "8daaf6152771" {
		t.Errorf("cipher example: got %s", got)
	}
	if got := hash12("0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601"); got != "e5627efa2ab1" {
		t.Errorf("extension example: got %s", got)
	}
}

func TestALPN(t *testing.T) {
	// technical_details/JA4.md, "ALPN Extension Value".
	tests := []struct {
		in   []byte
		want string
	}{
		{nil, "00"},
		{[]byte{}, "00"},
		{[]byte("h2"), "h2"},
		{[]byte("http/1.1"), "h1"},
		{[]byte("h"), "hh"},
		{[]byte{0xAB}, "ab"},
		{[]byte{0x20}, "20"},
		{[]byte{0xAB, 0xCD}, "ad"},
		{[]byte{0x20, 0x61}, "21"},
		{[]byte{0x30, 0xAB}, "3b"},
		{[]byte{0x61, 0x20}, "60"},
		{[]byte{0x30, 0x31, 0xAB, 0xCD}, "3d"},
		{[]byte{0x30, 0xAB, 0xCD, 0x31}, "01"},
	}
	for _, tt := range tests {
		if got := string(appendALPN(nil, tt.in)); got != tt.want {
			t.Errorf("ALPN %x: got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// helloSpec builds ClientHellos for the edge cases.
type helloSpec struct {
	legacy   uint16
	ciphers  []uint16
	noExts   bool
	exts     [][2]any // {type uint16, data []byte}
	sessionN int
}

func u16s(vs ...uint16) []byte {
	var b []byte
	for _, v := range vs {
		b = append(b, byte(v>>8), byte(v))
	}
	return b
}

func vec8(b []byte) []byte  { return append([]byte{byte(len(b))}, b...) }
func vec16(b []byte) []byte { return append([]byte{byte(len(b) >> 8), byte(len(b))}, b...) }

func (h helloSpec) message() []byte {
	body := u16s(h.legacy)
	body = append(body, make([]byte, 32)...)
	body = append(body, vec8(make([]byte, h.sessionN))...)
	body = append(body, vec16(u16s(h.ciphers...))...)
	body = append(body, 1, 0)
	if !h.noExts {
		var ext []byte
		for _, e := range h.exts {
			ext = append(ext, u16s(e[0].(uint16))...)
			ext = append(ext, vec16(e[1].([]byte))...)
		}
		body = append(body, vec16(ext)...)
	}
	n := len(body)
	return append([]byte{1, byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

func record(msg []byte) []byte {
	return append([]byte{22, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

func TestEdgeCases(t *testing.T) {
	sigs := [2]any{uint16(0x000d), vec16(u16s(0x0403, 0x0804))}
	alpn := func(names ...string) [2]any {
		var l []byte
		for _, n := range names {
			l = append(l, vec8([]byte(n))...)
		}
		return [2]any{uint16(0x0010), vec16(l)}
	}
	sni := [2]any{uint16(0), vec16(append([]byte{0}, vec16([]byte("example.com"))...))}
	versions := func(vs ...uint16) [2]any { return [2]any{uint16(0x002b), vec8(u16s(vs...))} }
	tests := []struct {
		name string
		h    helloSpec
		want string // the fingerprint, or its a part and hash inputs as "a|b-list|c-list"
	}{
		{"no ciphers, no extensions", helloSpec{legacy: 0x0303, noExts: true}, "t12i000000_000000000000_000000000000"},
		{"empty extension block", helloSpec{legacy: 0x0301, ciphers: []uint16{0x002f}}, "t10i0100" + "00|002f|"},
		{"GREASE ignored everywhere", helloSpec{legacy: 0x0303, ciphers: []uint16{0x0a0a, 0x1301, 0xfafa}, exts: [][2]any{{uint16(0x1a1a), []byte{}}, versions(0x2a2a, 0x0304, 0x0303), sigs}},
			"t13i0102" + "00|1301|000d,002b_0403,0804"},
		{"highest supported version, in any order", helloSpec{legacy: 0x0303, ciphers: []uint16{0x1301}, exts: [][2]any{versions(0x0303, 0x0304, 0x0302)}}, "t13i0101" + "00|1301|002b"},
		{"only GREASE versions: legacy", helloSpec{legacy: 0x0302, ciphers: []uint16{0x1301}, exts: [][2]any{versions(0x3a3a)}}, "t11i0101" + "00|1301|002b"},
		{"unknown version", helloSpec{legacy: 0x7f17, ciphers: []uint16{0x1301}, noExts: true}, "t00i0100" + "00|1301|"},
		{"SSL 3.0", helloSpec{legacy: 0x0300, ciphers: []uint16{0x000a}, noExts: true}, "ts3i0100" + "00|000a|"},
		{"SNI and ALPN counted, not hashed", helloSpec{legacy: 0x0303, ciphers: []uint16{0xc02f, 0x1301}, exts: [][2]any{sni, alpn("h2", "http/1.1"), sigs}},
			"t12d0203h2|1301,c02f|000d_0403,0804"},
		{"only SNI and ALPN: c is zeros", helloSpec{legacy: 0x0303, ciphers: []uint16{0x1301}, exts: [][2]any{sni, alpn("http/1.1")}}, "t12d0102h1|1301|"},
		{"empty ALPN list", helloSpec{legacy: 0x0303, ciphers: []uint16{0x1301}, exts: [][2]any{{uint16(0x0010), []byte{0, 0}}}}, "t12i010100|1301|"},
		{"no signature algorithms: no underscore", helloSpec{legacy: 0x0303, ciphers: []uint16{0x1301}, exts: [][2]any{{uint16(0x000a), vec16(u16s(0x001d))}, {uint16(0x0005), []byte{}}}}, "t12i010200|1301|0005,000a"},
		{"extensions sorted, signature algorithms not", helloSpec{legacy: 0x0303, ciphers: []uint16{0x1303, 0x1301, 0x1302}, exts: [][2]any{{uint16(0xff01), []byte{0}}, {uint16(0x000d), vec16(u16s(0x0804, 0x0403, 0x0201))}, {uint16(0x0005), []byte{}}}},
			"t12i030300|1301,1302,1303|0005,000d,ff01_0804,0403,0201"},
		{"session ID", helloSpec{legacy: 0x0303, ciphers: []uint16{0x1301}, sessionN: 32, noExts: true}, "t12i010000|1301|"},
	}
	// More than 99 ciphers and extensions: the counts stop at 99, the
	// hashes take every value.
	var many helloSpec
	many.legacy = 0x0303
	var list []string
	for i := range 120 {
		many.ciphers = append(many.ciphers, uint16(0x1000+i))
		list = append(list, fmt.Sprintf("%04x", 0x1000+i))
		many.exts = append(many.exts, [2]any{uint16(0x3000 + i), []byte{}})
	}
	var exts []string
	for i := range 120 {
		exts = append(exts, fmt.Sprintf("%04x", 0x3000+i))
	}
	tests = append(tests, struct {
		name string
		h    helloSpec
		want string
	}{"counts capped at 99", many, "t12i999900|" + strings.Join(list, ",") + "|" + strings.Join(exts, ",")})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if a, rest, ok := strings.Cut(tt.want, "|"); ok {
				b, c, _ := strings.Cut(rest, "|")
				want = a + "_" + hashOrZeros(b) + "_" + hashOrZeros(c)
			}
			msg := tt.h.message()
			got, err := Append(nil, msg, false)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("got %s, want %s", got, want)
			}
			if got, _ := Records(nil, record(msg)); string(got) != want {
				t.Errorf("Records: got %s, want %s", got, want)
			}
		})
	}
}

func hashOrZeros(s string) string {
	if s == "" || s[0] == '_' {
		return "000000000000"
	}
	return hash12(s)
}

func TestQUICMark(t *testing.T) {
	msg := helloSpec{legacy: 0x0303, ciphers: []uint16{0x1301}, noExts: true}.message()
	got, err := Append(nil, msg, true)
	if err != nil || got[0] != 'q' {
		t.Errorf("got %s, %v; want a 'q' fingerprint", got, err)
	}
}

// TestRecordsSplit: a ClientHello split across records, down to one byte
// a record (its 4-byte header split too), fingerprints as the whole.
func TestRecordsSplit(t *testing.T) {
	vs := readVectors(t)
	v := vs[0]
	want, _ := scan(v.records)
	msg := v.records[5 : 5+want]
	for _, size := range []int{1, 3, 100, 517} {
		var b []byte
		for rest := msg; len(rest) > 0; {
			n := min(size, len(rest))
			b = append(b, record(rest[:n])...)
			rest = rest[n:]
		}
		b = append(b, 23, 3, 3, 0, 1, 0) // an application data record after it: ignored
		got, err := Records(nil, b)
		if err != nil || string(got) != v.want {
			t.Errorf("records of %d bytes: got %s, %v; want %s", size, got, err, v.want)
		}
		if got := fingerprintThroughConn(b, 1); string(got) != v.want {
			t.Errorf("records of %d bytes, read a byte at a time: got %s, want %s", size, got, v.want)
		}
	}
}

func TestErrors(t *testing.T) {
	msg := helloSpec{legacy: 0x0303, ciphers: []uint16{0x1301}, exts: [][2]any{{uint16(5), []byte{}}}}.message()
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"HTTP on the TLS port", []byte("GET / HTTP/1.1\r\n\r\n"), ErrNotHello},
		{"SSL 2.0 record", []byte{0x80, 0x2e, 0x01, 0x00, 0x02}, ErrNotHello},
		{"alert record", []byte{21, 3, 1, 0, 2, 2, 40}, ErrNotHello},
		{"ServerHello", record(append([]byte{2}, msg[1:]...)), ErrNotHello},
		{"header only", []byte{22, 3, 1, 0, 200}, ErrTruncated},
		{"half a hello", record(msg)[:20], ErrTruncated},
		{"zero-length record", []byte{22, 3, 1, 0, 0}, ErrMalformed},
		{"oversized record", []byte{22, 3, 1, 0x48, 0x01}, ErrMalformed},
		{"hello larger than MaxRecord", []byte{22, 3, 1, 0, 4, 1, 0x01, 0, 0}, ErrMalformed},
		{"alert between fragments", append(record(msg[:10]), 21, 3, 3, 0, 2, 2, 40), ErrMalformed},
		{"cipher list past the end", record(append([]byte{1, 0, 0, 37, 3, 3, 33: 0, 38: 0}, 0xff, 0xff)), ErrMalformed},
		{"extension past the end", record(append(msg[:len(msg)-2:len(msg)-2], 0, 9)), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Records([]byte("x"), tt.b)
			if err != tt.want {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if string(got) != "x" {
				t.Errorf("dst changed on error: %q", got)
			}
		})
	}
}

func TestValid(t *testing.T) {
	good := []string{"t13d1516h2_8daaf6152771_e5627efa2ab1", "q13d0310h3_55b375c5d22e_cd85d2d88918", "t10i230100_6a57a6f57151_000000000000", "ts3i0100ff_000000000000_000000000000"}
	for _, s := range good {
		if !Valid([]byte(s)) {
			t.Errorf("Valid(%q) = false", s)
		}
	}
	bad := []string{"", "t13d1516h2_8daaf6152771_e5627efa2ab", "t13d1516h2_8daaf6152771_e5627efa2ab1x", "x13d1516h2_8daaf6152771_e5627efa2ab1",
		"t14d1516h2_8daaf6152771_e5627efa2ab1", "t13x1516h2_8daaf6152771_e5627efa2ab1", "t13d15a6h2_8daaf6152771_e5627efa2ab1",
		"t13d1516h-_8daaf6152771_e5627efa2ab1", "t13d1516h2-8daaf6152771_e5627efa2ab1", "t13d1516h2_8DAAF6152771_e5627efa2ab1",
		"t13d1516h2_8daaf6152771-e5627efa2ab1", "t13d1516h2_8daaf615277g_e5627efa2ab1", "t13d1516h2_8daaf6152771_e5627efa2ab\x00"}
	for _, s := range bad {
		if Valid([]byte(s)) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}

// fingerprintThroughConn feeds b through a Conn in reads of n bytes.
func fingerprintThroughConn(b []byte, n int) []byte {
	c := NewConn(&chunkConn{r: bytes.NewReader(b), n: n})
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	return c.Fingerprint()
}
