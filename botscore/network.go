package botscore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/oschwald/maxminddb-golang/v2"
	"github.com/oschwald/maxminddb-golang/v2/mmdbdata"
)

// The network signals (docs/botscore.md): what MaxMind databases and a
// hosting ASN list say about a client address. OpenNetwork opens and
// checks every file once, when the policy compiles, so a wrong file is a
// validation error; Lookup runs per request and allocates nothing.
//
// Allocation: maxminddb's reflection decoder allocates a string for every
// string it decodes (its string cache interns repeats, but a cache miss
// allocates), and Decode takes its target as an interface, so a record on
// the caller's stack escapes. Lookup therefore decodes with handwritten
// mmdbdata.CursorUnmarshaler records that read only numbers, booleans and
// the country code's bytes in place (mapped onto a constant table of
// two-letter strings), into scratch taken from a sync.Pool.

// NetworkOptions names the files a Network reads: paths already resolved
// (the policy's are relative to the policy file). Any may be empty; an
// empty one gives no signal.
type NetworkOptions struct {
	// ASNDatabase: a GeoLite2-ASN, GeoIP2-ASN or GeoIP2-ISP database, for
	// NetSignals.ASN.
	ASNDatabase string
	// CountryDatabase: a GeoIP2 or GeoLite2 Country or City database (or
	// GeoIP2-Enterprise), for NetSignals.Country (its country.iso_code).
	CountryDatabase string
	// AnonymousDatabase: a GeoIP2-Anonymous-IP or GeoIP-Anonymous-Plus
	// database, for Hosting (is_hosting_provider), VPN (is_anonymous_vpn),
	// Tor (is_tor_exit_node) and ResidentialProxy (is_residential_proxy).
	AnonymousDatabase string
	// HostingASNs: a list of hosting and datacenter AS numbers, one a line
	// ("AS15169 # comment" or "15169"; blank lines and # comments allowed),
	// as X4BNet's lists_vpn datacenter-ASN.txt. An ASN in it is Hosting.
	HostingASNs string
}

// Network answers NetSignals for client addresses. It is safe for
// concurrent use; Close it when the policy that opened it is retired.
type Network struct {
	asn, country, anon *maxminddb.Reader
	// hosting is the hosting ASN list, sorted, without duplicates.
	hosting []uint32
	scratch sync.Pool // *lookupScratch
}

// lookupScratch is one Lookup's decode targets.
type lookupScratch struct {
	asn     asnRecord
	country countryRecord
	anon    anonRecord
}

// The database types each option accepts: metadata database_type.
var (
	asnTypes       = []string{"GeoLite2-ASN", "GeoIP2-ASN", "GeoIP2-ISP"}
	countryTypes   = []string{"GeoIP2-Country", "GeoLite2-Country", "GeoIP2-City", "GeoLite2-City", "GeoIP2-Enterprise"}
	anonymousTypes = []string{"GeoIP2-Anonymous-IP", "GeoIP-Anonymous-Plus"}
)

// probeAddr is the address OpenNetwork looks up in every database to check
// that a lookup and its decode work.
var probeAddr = netip.MustParseAddr("1.1.1.1")

// OpenNetwork opens the files o names: each MaxMind database memory-mapped
// once, checked to be of a type its option accepts and to answer a lookup
// (probeAddr and its first records decode);
// the hosting ASN list read into memory. Every error names the option and
// the file ("asn_database \"x.mmdb\": ..."; a bad hosting_asns line is
// "hosting_asns file:line: ..."). With every option empty it returns a
// Network whose Lookup gives zero signals.
func OpenNetwork(o NetworkOptions) (*Network, error) {
	n := &Network{}
	n.scratch.New = func() any { return new(lookupScratch) }
	var err error
	if n.asn, err = openDB("asn_database", o.ASNDatabase, asnTypes, new(asnRecord)); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	if n.country, err = openDB("country_database", o.CountryDatabase, countryTypes, new(countryRecord)); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	if n.anon, err = openDB("anonymous_database", o.AnonymousDatabase, anonymousTypes, new(anonRecord)); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	if o.HostingASNs != "" {
		if n.hosting, err = readHostingASNs(o.HostingASNs); err != nil {
			return nil, errors.Join(err, n.Close())
		}
	}
	return n, nil
}

// openDB opens one database (nil, nil when path is empty), checks its type
// is one of types and that probeAddr decodes into rec.
func openDB(option, path string, types []string, rec mmdbdata.CursorUnmarshaler) (*maxminddb.Reader, error) {
	if path == "" {
		return nil, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s %q: %w", option, path, err)
	}
	db, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s %q: not a MaxMind database: %w", option, path, err)
	}
	if t := db.Metadata.DatabaseType; !slices.Contains(types, t) {
		db.Close()
		return nil, fmt.Errorf("%s %q: database type is %q, want one of %q", option, path, t, types)
	}
	if err := db.Lookup(probeAddr).Decode(rec); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s %q: looking up %s: %w", option, path, probeAddr, err)
	}
	// The probe may find nothing; the first records with data check the
	// decoder against the file's real records.
	i := 0
	for res := range db.Networks() {
		if err := res.Decode(rec); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s %q: decoding the record of %s: %w", option, path, res.Prefix(), err)
		}
		if i++; i == probeRecords {
			break
		}
	}
	return db, nil
}

// probeRecords is how many of a database's first records OpenNetwork
// decodes, beyond the probe address.
const probeRecords = 16

// readHostingASNs reads a hosting ASN list: one AS number a line, with or
// without its "AS" prefix, then an optional # comment. AS0 is refused (it
// would flag every address of unknown ASN), and so is a list with none.
func readHostingASNs(path string) ([]uint32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hosting_asns %q: %w", path, err)
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	var asns []uint32
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := bytes.Cut(sc.Bytes(), []byte("#"))
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		digits := text
		if len(digits) > 2 && (digits[0] == 'A' || digits[0] == 'a') && (digits[1] == 'S' || digits[1] == 's') {
			digits = digits[2:]
		}
		asn, err := strconv.ParseUint(string(digits), 10, 32)
		if err != nil || asn == 0 {
			return nil, fmt.Errorf("hosting_asns %s:%d: %q is not an AS number (want a line like \"AS15169 # comment\"; AS0 is refused)", path, line, text)
		}
		asns = append(asns, uint32(asn))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hosting_asns %q: %w", path, err)
	}
	if len(asns) == 0 {
		return nil, fmt.Errorf("hosting_asns %q: holds no AS numbers", path)
	}
	slices.Sort(asns)
	return slices.Compact(asns), nil
}

// Close releases the databases' memory maps. The Network must not be used
// after, nor Close called while a Lookup runs.
func (n *Network) Close() error {
	var errs []error
	for _, db := range []*maxminddb.Reader{n.asn, n.country, n.anon} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// HostingASNs returns how many distinct AS numbers the hosting list holds.
func (n *Network) HostingASNs() int { return len(n.hosting) }

// Lookup fills sig's network fields for addr: ASN, Country, Hosting, VPN,
// Tor and ResidentialProxy (each zero when no database answers); it leaves
// VerifiedClaim, which VerifiedCrawler answers from the request's claim.
// An IPv4-mapped IPv6 address is looked up as IPv4. An anonymous-IP record
// found with no flag set flags nothing. A database that fails to decode a
// record (a corrupt file) gives that database's zero signals. A nil
// Network gives zero signals. It allocates nothing.
func (n *Network) Lookup(addr netip.Addr, sig *NetSignals) {
	sig.ASN, sig.Country = 0, ""
	sig.Hosting, sig.VPN, sig.Tor, sig.ResidentialProxy = false, false, false, false
	addr = addr.Unmap()
	if n == nil || !addr.IsValid() || (n.asn == nil && n.country == nil && n.anon == nil) {
		return
	}
	s := n.scratch.Get().(*lookupScratch)
	*s = lookupScratch{}
	if n.asn != nil && n.asn.Lookup(addr).Decode(&s.asn) == nil {
		sig.ASN = s.asn.number
	}
	if n.country != nil && n.country.Lookup(addr).Decode(&s.country) == nil {
		sig.Country = s.country.code
	}
	if n.anon != nil && n.anon.Lookup(addr).Decode(&s.anon) == nil {
		sig.Hosting = s.anon.hosting
		sig.VPN, sig.Tor, sig.ResidentialProxy = s.anon.vpn, s.anon.tor, s.anon.residential
	}
	n.scratch.Put(s)
	if sig.ASN != 0 && !sig.Hosting {
		_, sig.Hosting = slices.BinarySearch(n.hosting, sig.ASN)
	}
}

// The records: each reads its few fields from the record's map and skips
// the rest, without allocating.

// asnRecord reads autonomous_system_number (ASN and ISP databases).
type asnRecord struct{ number uint32 }

func (r *asnRecord) UnmarshalMaxMindDBCursor(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	return readMap[asnRecord](c, func(key []byte, v mmdbdata.Cursor) (next mmdbdata.Cursor, read bool, err error) {
		if string(key) != "autonomous_system_number" {
			return next, false, nil
		}
		var u uint64
		u, next, err = v.ReadUint()
		if err == nil && u > 1<<32-1 {
			err = mmdbdata.NewUnmarshalTypeError[uint32](u)
		}
		r.number = uint32(u)
		return next, true, err
	})
}

// countryRecord reads country.iso_code (Country, City and Enterprise
// databases) into a constant string.
type countryRecord struct{ code string }

func (r *countryRecord) UnmarshalMaxMindDBCursor(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	return readMap[countryRecord](c, func(key []byte, v mmdbdata.Cursor) (mmdbdata.Cursor, bool, error) {
		if string(key) != "country" {
			return mmdbdata.Cursor{}, false, nil
		}
		next, err := r.readCountry(v)
		return next, true, err
	})
}

func (r *countryRecord) readCountry(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	return readMap[countryRecord](c, func(key []byte, v mmdbdata.Cursor) (next mmdbdata.Cursor, read bool, err error) {
		if string(key) != "iso_code" {
			return next, false, nil
		}
		// ReadMapKey reads a string (or a pointer to one) as the
		// database's own bytes; ReadString would copy them.
		var code []byte
		if code, _, err = v.ReadMapKey(); err == nil {
			r.code = countryCode(code)
			next, err = v.Skip()
		}
		return next, true, err
	})
}

// anonRecord reads the anonymous-IP flags. A record with none of them
// (these databases answer unlisted public addresses with an empty map)
// leaves them all false.
type anonRecord struct{ vpn, tor, residential, hosting bool }

func (r *anonRecord) UnmarshalMaxMindDBCursor(c mmdbdata.Cursor) (mmdbdata.Cursor, error) {
	return readMap[anonRecord](c, func(key []byte, v mmdbdata.Cursor) (next mmdbdata.Cursor, read bool, err error) {
		var flag *bool
		switch string(key) {
		case "is_anonymous_vpn":
			flag = &r.vpn
		case "is_tor_exit_node":
			flag = &r.tor
		case "is_residential_proxy":
			flag = &r.residential
		case "is_hosting_provider":
			flag = &r.hosting
		default:
			return next, false, nil
		}
		*flag, next, err = v.ReadBool()
		return next, true, err
	})
}

// readMap walks the map at c, the one shape every record reads: field is
// called with each key and its value, and returns the cursor after the
// value when it read it (read true); a value it did not read is skipped.
// A value that is not a map is T's unmarshal error. field is only called,
// never kept, so it stays on the stack: nothing is allocated.
func readMap[T any](c mmdbdata.Cursor, field func(key []byte, v mmdbdata.Cursor) (next mmdbdata.Cursor, read bool, err error)) (mmdbdata.Cursor, error) {
	m, err := c.Map()
	if err != nil {
		return mmdbdata.Cursor{}, mmdbdata.NormalizeUnmarshalError[T](err)
	}
	var next mmdbdata.Cursor
	for {
		key, v, ok := m.Next(next)
		if !ok {
			break
		}
		var read bool
		if next, read, err = field(key, v); err == nil && !read {
			next, err = v.Skip()
		}
		if err != nil {
			return mmdbdata.Cursor{}, err
		}
	}
	return m.End()
}

// countryCodes holds every two-letter code "AA".."ZZ", indexed by
// (first-'A')*26 + second-'A', as slices of one string built once, so a
// looked-up Country is a constant rather than a copy.
var countryCodes = func() *[26 * 26]string {
	b := make([]byte, 0, 2*26*26)
	for c1 := byte('A'); c1 <= 'Z'; c1++ {
		for c2 := byte('A'); c2 <= 'Z'; c2++ {
			b = append(b, c1, c2)
		}
	}
	all := string(b)
	t := new([26 * 26]string)
	for i := range t {
		t[i] = all[2*i : 2*i+2]
	}
	return t
}()

// countryCode maps an ISO 3166-1 alpha-2 code to its constant string, ""
// for anything that is not two upper-case letters.
func countryCode(b []byte) string {
	if len(b) != 2 || b[0] < 'A' || b[0] > 'Z' || b[1] < 'A' || b[1] > 'Z' {
		return ""
	}
	return countryCodes[int(b[0]-'A')*26+int(b[1]-'A')]
}
