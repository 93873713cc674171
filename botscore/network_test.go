package botscore

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oschwald/maxminddb-golang/v2"
)

// The MaxMind test databases and X4BNet's datacenter ASN list, as copied
// into testdata/data (its SOURCES.md files list the addresses used here).
var (
	asnDB       = filepath.Join("..", "testdata", "data", "mmdb", "GeoLite2-ASN-Test.mmdb")
	countryDB   = filepath.Join("..", "testdata", "data", "mmdb", "GeoIP2-Country-Test.mmdb")
	anonDB      = filepath.Join("..", "testdata", "data", "mmdb", "GeoIP2-Anonymous-IP-Test.mmdb")
	ispDB       = filepath.Join("..", "testdata", "data", "mmdb", "GeoIP2-ISP-Test.mmdb")
	liteCountry = filepath.Join("..", "testdata", "data", "mmdb", "GeoLite2-Country-Test.mmdb")
	anonPlusDB  = filepath.Join("..", "testdata", "data", "mmdb", "GeoIP-Anonymous-Plus-Test.mmdb")
	connTypeDB  = filepath.Join("..", "testdata", "data", "mmdb", "GeoIP2-Connection-Type-Test.mmdb")
	hostingList = filepath.Join("..", "testdata", "data", "asn", "x4bnet-lists_vpn", "datacenter-ASN.txt")
)

func openAll(t testing.TB) *Network {
	t.Helper()
	n, err := OpenNetwork(NetworkOptions{
		ASNDatabase:       asnDB,
		CountryDatabase:   countryDB,
		AnonymousDatabase: anonDB,
		HostingASNs:       hostingList,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

func TestLookup(t *testing.T) {
	n := openAll(t)
	if got := n.HostingASNs(); got != 892 {
		t.Errorf("HostingASNs() = %d, want 892 (the distinct ASNs of datacenter-ASN.txt)", got)
	}
	for _, tc := range []struct {
		name, addr string
		want       NetSignals
	}{
		// Hosting from the list: the ASN is in datacenter-ASN.txt.
		{"google", "1.0.0.1", NetSignals{ASN: 15169, Hosting: true}},
		{"akamai", "23.32.0.1", NetSignals{ASN: 35994, Hosting: true}},
		{"hurricane electric v6", "2600:7000::1", NetSignals{ASN: 6939, Hosting: true}},
		// Residential and mobile networks: ASN, country, nothing else.
		{"comcast", "73.1.2.3", NetSignals{ASN: 7922}},
		{"bredband2", "89.160.20.112", NetSignals{ASN: 29518, Country: "SE"}},
		{"qwest", "216.160.83.56", NetSignals{ASN: 209, Country: "US"}},
		{"dtag v6", "2003::1", NetSignals{ASN: 3320}},
		{"verizon wireless", "97.0.0.1", NetSignals{ASN: 6167}},
		{"cellco", "149.101.100.1", NetSignals{ASN: 6167, Country: "US"}},
		// The anonymous-IP database's flags.
		{"every flag", "81.2.69.160", NetSignals{Country: "GB", Hosting: true, VPN: true, Tor: true, ResidentialProxy: true}},
		{"every flag, v4-mapped", "::ffff:81.2.69.160", NetSignals{Country: "GB", Hosting: true, VPN: true, Tor: true, ResidentialProxy: true}},
		{"hosting provider", "71.160.223.1", NetSignals{Hosting: true}},
		{"residential proxy", "6.1.0.4", NetSignals{ResidentialProxy: true}},
		{"tor", "65.0.0.1", NetSignals{Tor: true}},
		{"vpn", "1.2.0.1", NetSignals{VPN: true}},
		{"public proxy only: not a signal", "2001:480:3a::1", NetSignals{}},
		// Country only.
		{"jp v6", "2001:218::1", NetSignals{Country: "JP"}},
		{"ua v6", "2a02:d300::1", NetSignals{Country: "UA"}},
		// In no database.
		{"private", "10.0.0.1", NetSignals{}},
		{"documentation v6", "2001:db8::1", NetSignals{}},
		{"loopback", "127.0.0.1", NetSignals{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Stale values must be overwritten; VerifiedClaim is the
			// caller's and must be left.
			got := NetSignals{ASN: 1, Country: "ZZ", Hosting: true, VPN: true, Tor: true, ResidentialProxy: true, VerifiedClaim: true}
			n.Lookup(netip.MustParseAddr(tc.addr), &got)
			tc.want.VerifiedClaim = true
			if got != tc.want {
				t.Errorf("Lookup(%s) = %+v, want %+v", tc.addr, got, tc.want)
			}
		})
	}
	var zero NetSignals
	n.Lookup(netip.Addr{}, &zero)
	if zero != (NetSignals{}) {
		t.Errorf("Lookup(zero Addr) = %+v, want zero", zero)
	}
}

// The anonymous-IP database answers unlisted public addresses with a found,
// empty record: the Lookup cases above for them would pass vacuously if the
// database did not find them, so check it does.
func TestAnonymousFoundEmpty(t *testing.T) {
	db, err := maxminddb.Open(anonDB)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := openAll(t)
	for _, a := range []string{"73.1.2.3", "1.0.0.1", "97.0.0.1"} {
		addr := netip.MustParseAddr(a)
		res := db.Lookup(addr)
		var rec map[string]any
		if err := res.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		if !res.Found() || len(rec) != 0 {
			t.Fatalf("%s: found %v, record %v; the test expects a found, empty record", a, res.Found(), rec)
		}
		var sig NetSignals
		n.Lookup(addr, &sig)
		if sig.VPN || sig.Tor || sig.ResidentialProxy {
			t.Errorf("%s: a found, empty record flagged %+v", a, sig)
		}
	}
}

// The other database types each option accepts answer as the main ones.
func TestLookupOtherTypes(t *testing.T) {
	n, err := OpenNetwork(NetworkOptions{ASNDatabase: ispDB, CountryDatabase: liteCountry, AnonymousDatabase: anonPlusDB})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, tc := range []struct {
		addr string
		want NetSignals
	}{
		{"1.128.0.1", NetSignals{ASN: 1221}},
		{"23.32.0.1", NetSignals{ASN: 35994}},                    // no hosting list: not Hosting
		{"89.160.20.112", NetSignals{ASN: 29518, Country: "SE"}}, // ISP: 89.160.0.0/20
		{"1.2.0.1", NetSignals{VPN: true}},
		{"73.1.2.3", NetSignals{ASN: 7922}},
	} {
		var got NetSignals
		n.Lookup(netip.MustParseAddr(tc.addr), &got)
		if got != tc.want {
			t.Errorf("Lookup(%s) = %+v, want %+v", tc.addr, got, tc.want)
		}
	}
}

func TestLookupNoDatabases(t *testing.T) {
	n, err := OpenNetwork(NetworkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sig := NetSignals{ASN: 7, Country: "GB", VPN: true}
	n.Lookup(netip.MustParseAddr("81.2.69.160"), &sig)
	if sig != (NetSignals{}) {
		t.Errorf("no databases: %+v, want zero", sig)
	}
	if err := n.Close(); err != nil {
		t.Error(err)
	}
	var nilNet *Network
	sig = NetSignals{ASN: 7}
	nilNet.Lookup(netip.MustParseAddr("81.2.69.160"), &sig)
	if sig != (NetSignals{}) {
		t.Errorf("nil Network: %+v, want zero", sig)
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenNetworkErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "GeoLite2-ASN.mmdb")
	notMMDB := writeFile(t, "fake.mmdb", "this is not a MaxMind database\n")
	for _, tc := range []struct {
		name string
		o    NetworkOptions
		want []string // substrings of the error, in order
	}{
		{"missing asn", NetworkOptions{ASNDatabase: missing}, []string{"asn_database", missing, "no such file"}},
		{"missing country", NetworkOptions{ASNDatabase: asnDB, CountryDatabase: missing}, []string{"country_database", missing, "no such file"}},
		{"not mmdb", NetworkOptions{AnonymousDatabase: notMMDB}, []string{"anonymous_database", notMMDB, "not a MaxMind database"}},
		{"a text list as database", NetworkOptions{ASNDatabase: hostingList}, []string{"asn_database", hostingList, "not a MaxMind database"}},
		{"country as asn", NetworkOptions{ASNDatabase: countryDB}, []string{"asn_database", countryDB, `database type is "GeoIP2-Country"`, "GeoLite2-ASN"}},
		{"asn as country", NetworkOptions{CountryDatabase: asnDB}, []string{"country_database", asnDB, `"GeoLite2-ASN"`, "GeoIP2-Country"}},
		{"asn as anonymous", NetworkOptions{AnonymousDatabase: asnDB}, []string{"anonymous_database", asnDB, `"GeoLite2-ASN"`, "GeoIP2-Anonymous-IP"}},
		{"connection type", NetworkOptions{ASNDatabase: asnDB, AnonymousDatabase: connTypeDB}, []string{"anonymous_database", connTypeDB, `"GeoIP2-Connection-Type"`}},
		{"missing list", NetworkOptions{HostingASNs: missing}, []string{"hosting_asns", missing, "no such file"}},
		{"bad list line", NetworkOptions{HostingASNs: writeFile(t, "asns.txt", "# hosting\nAS15169 # Google\n\nASX # typo\n")}, []string{"hosting_asns", "asns.txt:4:", `"ASX" is not an AS number`}},
		{"too large", NetworkOptions{HostingASNs: writeFile(t, "big.txt", "AS4294967296\n")}, []string{"big.txt:1:", "4294967296"}},
		{"as0", NetworkOptions{HostingASNs: writeFile(t, "zero.txt", "AS15169\nAS0\n")}, []string{"zero.txt:2:", "AS0"}},
		{"two numbers", NetworkOptions{HostingASNs: writeFile(t, "two.txt", "15169 6939\n")}, []string{"two.txt:1:", `"15169 6939"`}},
		{"empty list", NetworkOptions{HostingASNs: writeFile(t, "empty.txt", "# nothing yet\n\n")}, []string{"hosting_asns", "empty.txt", "holds no AS numbers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := OpenNetwork(tc.o)
			if err == nil {
				n.Close()
				t.Fatalf("OpenNetwork(%+v) succeeded, want an error", tc.o)
			}
			msg := err.Error()
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q: want %q (in order: %q)", msg, w, tc.want)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestHostingListForms(t *testing.T) {
	list := writeFile(t, "asns.txt", "\ufeffAS15169\r\n  as6939\t# lower case, CRLF, tab\r\n35994\n# AS7922 commented out\nAS15169 # duplicate\n")
	n, err := OpenNetwork(NetworkOptions{ASNDatabase: asnDB, HostingASNs: list})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := n.HostingASNs(); got != 3 {
		t.Errorf("HostingASNs() = %d, want 3", got)
	}
	for addr, want := range map[string]bool{"1.0.0.1": true, "2600:7000::1": true, "23.32.0.1": true, "73.1.2.3": false, "10.0.0.1": false} {
		var sig NetSignals
		n.Lookup(netip.MustParseAddr(addr), &sig)
		if sig.Hosting != want {
			t.Errorf("%s (AS%d): Hosting = %v, want %v", addr, sig.ASN, sig.Hosting, want)
		}
	}
}

// lookupAddrs covers every path: list hosting, residential, every flag,
// v4-mapped, IPv6, found-empty, not found.
var lookupAddrs = []netip.Addr{
	netip.MustParseAddr("1.0.0.1"),
	netip.MustParseAddr("73.1.2.3"),
	netip.MustParseAddr("89.160.20.112"),
	netip.MustParseAddr("81.2.69.160"),
	netip.MustParseAddr("::ffff:81.2.69.160"),
	netip.MustParseAddr("2001:218::1"),
	netip.MustParseAddr("2003::1"),
	netip.MustParseAddr("10.0.0.1"),
}

func TestLookupAllocs(t *testing.T) {
	n := openAll(t)
	for _, addr := range lookupAddrs {
		allocs := testing.AllocsPerRun(100, func() {
			var sig NetSignals
			n.Lookup(addr, &sig)
			sig.VerifiedClaim = VerifiedCrawler(ClaimGooglebot, addr)
			if sig.ASN == 1 {
				t.Fatal("unreachable")
			}
		})
		if allocs != 0 {
			t.Errorf("Lookup(%s) + VerifiedCrawler: %v allocations, want 0", addr, allocs)
		}
	}
}

// BenchmarkLookup is one request's network signals: the three database
// lookups, the hosting list and the crawler check.
func BenchmarkLookup(b *testing.B) {
	n := openAll(b)
	b.ReportAllocs()
	var sig NetSignals
	for i := 0; b.Loop(); i++ {
		addr := lookupAddrs[i%len(lookupAddrs)]
		n.Lookup(addr, &sig)
		sig.VerifiedClaim = VerifiedCrawler(ClaimGooglebot, addr)
	}
}

func BenchmarkLookupParallel(b *testing.B) {
	n := openAll(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var sig NetSignals
		for i := 0; pb.Next(); i++ {
			addr := lookupAddrs[i%len(lookupAddrs)]
			n.Lookup(addr, &sig)
			sig.VerifiedClaim = VerifiedCrawler(ClaimGooglebot, addr)
		}
	})
}

// BenchmarkDecodeReflect is the reflection decoder Lookup does not use, for
// comparison: a struct with the same fields, strings as strings.
func BenchmarkDecodeReflect(b *testing.B) {
	country, err := maxminddb.Open(countryDB)
	if err != nil {
		b.Fatal(err)
	}
	defer country.Close()
	b.ReportAllocs()
	addr := netip.MustParseAddr("89.160.20.112")
	for b.Loop() {
		var rec struct {
			Country struct {
				ISOCode string `maxminddb:"iso_code"`
			} `maxminddb:"country"`
		}
		if err := country.Lookup(addr).Decode(&rec); err != nil || rec.Country.ISOCode != "SE" {
			b.Fatal(rec, err)
		}
	}
}

// mmdbString, mmdbUint and mmdbMap encode MaxMind DB data section values
// (MaxMind DB format spec 2.0, "Data Section"); only short values.
func mmdbString(s string) []byte { return append([]byte{2<<5 | byte(len(s))}, s...) }

func mmdbUint(typ byte, v uint64, size int) []byte {
	b := make([]byte, size)
	for i := range size {
		b[size-1-i] = byte(v >> (8 * i))
	}
	return append([]byte{typ<<5 | byte(size)}, b...)
}

func mmdbMap(kv ...[]byte) []byte {
	out := []byte{7<<5 | byte(len(kv)/2)}
	for _, b := range kv {
		out = append(out, b...)
	}
	return out
}

// mmdbFile builds an IPv4 database of the given type with one node: the
// lower half of the address space (0.0.0.0/1, which holds probeAddr) maps
// to record, the upper half to nothing.
func mmdbFile(t *testing.T, dbType string, record []byte) string {
	return mmdbFileHalf(t, dbType, record, false)
}

// mmdbFileHalf is mmdbFile with the record in the upper half
// (128.0.0.0/1) when upper is set.
func mmdbFileHalf(t *testing.T, dbType string, record []byte, upper bool) string {
	t.Helper()
	const nodeCount = 1
	pointer := nodeCount + 16 // data section offset 0
	tree := []byte{byte(pointer >> 16), byte(pointer >> 8), byte(pointer), 0, 0, nodeCount}
	if upper {
		tree = []byte{0, 0, nodeCount, byte(pointer >> 16), byte(pointer >> 8), byte(pointer)}
	}
	var b []byte
	b = append(b, tree...)
	b = append(b, make([]byte, 16)...)
	b = append(b, record...)
	b = append(b, "\xAB\xCD\xEFMaxMind.com"...)
	b = append(b, mmdbMap(
		mmdbString("binary_format_major_version"), mmdbUint(5, 2, 1),
		mmdbString("binary_format_minor_version"), mmdbUint(5, 0, 0),
		mmdbString("build_epoch"), []byte{4, 2, 0x65, 0, 0, 0}, // uint64 (extended type 9), 4 bytes
		mmdbString("database_type"), mmdbString(dbType),
		mmdbString("ip_version"), mmdbUint(5, 4, 1),
		mmdbString("node_count"), mmdbUint(6, nodeCount, 1),
		mmdbString("record_size"), mmdbUint(5, 24, 1),
	)...)
	return writeFile(t, dbType+".mmdb", string(b))
}

// A database of the right type whose records are not the expected shape
// fails at open, naming the file; the same record read by Lookup gives
// zero signals rather than an error at request time.
func TestOpenNetworkBadRecords(t *testing.T) {
	good := mmdbFile(t, "GeoLite2-ASN", mmdbMap(mmdbString("autonomous_system_number"), mmdbUint(6, 64500, 2)))
	n, err := OpenNetwork(NetworkOptions{ASNDatabase: good})
	if err != nil {
		t.Fatalf("the hand-built database does not open: %v", err)
	}
	var sig NetSignals
	n.Lookup(probeAddr, &sig)
	if sig.ASN != 64500 {
		t.Errorf("hand-built database: ASN %d, want 64500", sig.ASN)
	}
	n.Close()

	// A bad record the probe does not reach is found among the first
	// records.
	upper := mmdbFileHalf(t, "GeoLite2-ASN", mmdbMap(mmdbString("autonomous_system_number"), mmdbString("x")), true)
	if n, err := OpenNetwork(NetworkOptions{ASNDatabase: upper}); err == nil {
		n.Close()
		t.Errorf("a bad record in 128.0.0.0/1: OpenNetwork succeeded")
	} else if want := "asn_database " + strconv.Quote(upper) + ": decoding the record of 128.0.0.0/1: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start %q", err, want)
	}

	for _, tc := range []struct {
		option string
		o      func(string) NetworkOptions
		dbType string
		record []byte
	}{
		{"asn_database", func(p string) NetworkOptions { return NetworkOptions{ASNDatabase: p} }, "GeoLite2-ASN",
			mmdbMap(mmdbString("autonomous_system_number"), mmdbString("AS15169"))},
		{"asn_database", func(p string) NetworkOptions { return NetworkOptions{ASNDatabase: p} }, "GeoIP2-ISP",
			mmdbString("not a map")},
		{"country_database", func(p string) NetworkOptions { return NetworkOptions{CountryDatabase: p} }, "GeoIP2-Country",
			mmdbMap(mmdbString("country"), mmdbMap(mmdbString("iso_code"), mmdbUint(5, 7, 1)))},
		{"country_database", func(p string) NetworkOptions { return NetworkOptions{CountryDatabase: p} }, "GeoIP2-City",
			mmdbMap(mmdbString("country"), mmdbString("GB"))},
		{"anonymous_database", func(p string) NetworkOptions { return NetworkOptions{AnonymousDatabase: p} }, "GeoIP2-Anonymous-IP",
			mmdbMap(mmdbString("is_anonymous_vpn"), mmdbString("yes"))},
	} {
		t.Run(tc.dbType, func(t *testing.T) {
			path := mmdbFile(t, tc.dbType, tc.record)
			n, err := OpenNetwork(tc.o(path))
			if err == nil {
				n.Close()
				t.Fatal("OpenNetwork succeeded, want an error")
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tc.option+" "+strconv.Quote(path)+": looking up 1.1.1.1: ") {
				t.Errorf("error %q: want it to name %s %q and the probe", msg, tc.option, path)
			}
			// What Lookup does with such a record, were the file swapped
			// under a running Network: zero, no panic.
			db, err := maxminddb.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			bad := &Network{asn: db}
			switch tc.option {
			case "country_database":
				bad = &Network{country: db}
			case "anonymous_database":
				bad = &Network{anon: db}
			}
			bad.scratch.New = func() any { return new(lookupScratch) }
			sig := NetSignals{ASN: 9, Country: "GB", VPN: true}
			bad.Lookup(probeAddr, &sig)
			if sig != (NetSignals{}) {
				t.Errorf("Lookup of a bad record: %+v, want zero", sig)
			}
		})
	}
}

// Lookups from many goroutines share the Network (and its scratch pool)
// and each gets its own address's answer; run with -race.
func TestLookupConcurrent(t *testing.T) {
	n := openAll(t)
	want := make([]NetSignals, len(lookupAddrs))
	for i, a := range lookupAddrs {
		n.Lookup(a, &want[i])
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := (g + i) % len(lookupAddrs)
				var sig NetSignals
				n.Lookup(lookupAddrs[k], &sig)
				if sig != want[k] {
					t.Errorf("%s: %+v, want %+v", lookupAddrs[k], sig, want[k])
					return
				}
			}
		})
	}
	wg.Wait()
}
