package botscore

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
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
		{"23.32.0.1", NetSignals{ASN: 35994}}, // no hosting list: not Hosting
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
