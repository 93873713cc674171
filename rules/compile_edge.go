package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/ipv6"
)

// The edge { } and store { } blocks.

func (c *Compiler) store(blocks []storeBlock, sc *StoreConfig) {
	for i := range blocks {
		b := &blocks[i]
		if i > 0 {
			c.Errorf(b.DefRange, "Duplicate store", "only one store block is allowed; the first is at %s", blocks[0].DefRange)
			continue
		}
		switch b.Kind {
		case "memory":
			if b.URL != nil {
				c.Errorf(b.URLRange, "Unexpected url", "the memory store takes no url")
			}
			c.memoryStoreAttrs(b)
		case "redis":
			if b.URL == nil {
				c.Errorf(b.DefRange, "Missing url", "store \"redis\" needs url, such as \"redis://127.0.0.1:6379/0\", \"rediss://redis.internal:6380/0\", \"redis+cluster://10.0.0.1:7000,10.0.0.2:7000\" or \"redis+sentinel://mymaster@10.0.0.1:26379,10.0.0.2:26379\"")
			} else if err := ValidateStoreURL(*b.URL); err != nil {
				c.Errorf(b.URLRange, "Invalid url", "%v", err)
			}
			if b.MaxKeys != nil {
				c.Errorf(b.MaxKeysRange, "Unexpected max_keys", "max_keys bounds the memory store; Redis is bounded by its own maxmemory")
			}
			c.redisStoreAttrs(b, sc) // compile_store.go
		default:
			c.Errorf(b.KindRange, "Unknown store", "%q is not a store; want \"memory\" or \"redis\"", b.Kind)
		}
		sc.Kind = b.Kind
		c.storeNetwork(b, sc) // network.go
		if b.MaxKeys != nil {
			sc.MaxKeys = *b.MaxKeys
			if sc.MaxKeys < 1 || sc.MaxKeys > MaxKeysLimit {
				c.Errorf(b.MaxKeysRange, "Invalid max_keys", "max_keys must be between 1 and %d, got %d", MaxKeysLimit, sc.MaxKeys)
				sc.MaxKeys = DefaultMaxKeys
			}
		}
		if b.URL != nil {
			sc.URL = *b.URL
		}
		if b.Timeout != nil {
			d, err := ParseDuration(*b.Timeout)
			if err != nil || d <= 0 {
				c.Errorf(b.TimeoutRange, "Invalid timeout", "%q is not a positive duration such as \"5ms\"", *b.Timeout)
			} else if d > time.Second {
				c.Errorf(b.TimeoutRange, "Timeout too long", "%q: a store call's budget sits on every request's path; keep it to a few milliseconds (at most 1s)", *b.Timeout)
			}
			sc.Timeout = d
		}
		if b.FleetSize != nil {
			sc.FleetSize = *b.FleetSize
			if sc.FleetSize < 1 {
				c.Errorf(b.FleetSizeRange, "Invalid fleet_size", "fleet_size must be at least 1, got %d", sc.FleetSize)
			}
		}
	}
}

// ValidateStoreURL checks a store address as the policy's url and the -store
// flag take it: "redis://HOST:PORT/DB" (DB optional, 0-15 by default in
// Redis), "rediss://HOST:PORT/DB" (TLS), "redis+cluster://HOST:PORT,HOST:PORT"
// or "redis+sentinel://MASTER@HOST:PORT,HOST:PORT/DB" (sentinels; MASTER
// the name they monitor; "rediss+sentinel://" over TLS), each with
// optional "USER:PASSWORD@" credentials first (docs/policy.md, "store").
func ValidateStoreURL(s string) error {
	shown := RedactURL(s) // errors are printed and logged: never the password
	scheme, rest, ok := strings.Cut(s, "://")
	cluster := scheme == "redis+cluster"
	sentinel := scheme == "redis+sentinel" || scheme == "rediss+sentinel"
	if !ok || !cluster && !sentinel && scheme != "redis" && scheme != "rediss" {
		return fmt.Errorf("%q is not redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+cluster://HOST:PORT,HOST:PORT or redis+sentinel://MASTER@HOST:PORT,HOST:PORT", shown)
	}
	if strings.ContainsAny(rest, "?#") {
		return fmt.Errorf("%q: a store url takes no query; TLS settings and timeouts are store block attributes", shown)
	}
	at := strings.LastIndexByte(rest, '@')
	head := ""
	if at >= 0 {
		head, rest = rest[:at], rest[at+1:] // credentials (the last '@': a password may hold one)
	}
	if sentinel {
		if i := strings.LastIndexByte(head, '@'); i >= 0 {
			head = head[i+1:]
		}
		if !ValidSentinelMaster(head) {
			return fmt.Errorf("%q: want redis+sentinel://[USER:PASSWORD@]MASTER@HOST:PORT,HOST:PORT, MASTER the name the sentinels monitor (letters, digits, '.', '_', '-')", shown)
		}
	}
	hosts, db, hasDB := strings.Cut(rest, "/")
	if hasDB && db != "" {
		if cluster {
			return fmt.Errorf("%q: Redis Cluster has no database number", shown)
		}
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return fmt.Errorf("%q: database %q is not a number", shown, db)
		}
	}
	list := strings.Split(hosts, ",")
	if !cluster && !sentinel && len(list) != 1 {
		return fmt.Errorf("%q: several addresses need redis+cluster:// or redis+sentinel://", shown)
	}
	for _, h := range list {
		if _, _, err := splitHostPort(h); err != nil || h == "" {
			return fmt.Errorf("%q: %q is not HOST:PORT", shown, h)
		}
	}
	return nil
}

// RedactURL returns a store URL fit to print: its credentials, if any,
// replaced by "xxxxx" ("redis://xxxxx@10.0.0.1:6379/0"); a sentinel URL
// keeps its master's name ("redis+sentinel://xxxxx@mymaster@10.0.0.1:26379").
func RedactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	// The last '@': a password may hold '/' or '@' unescaped, and a store
	// URL's path (a database number) holds neither.
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return s
	}
	if scheme == "redis+sentinel" || scheme == "rediss+sentinel" {
		head := rest[:at]
		master := head[strings.LastIndexByte(head, '@')+1:]
		switch {
		case !ValidSentinelMaster(master):
			// Not a master's name: credentials without one, all hidden.
		case len(master) == len(head):
			return s // a master's name, no credentials
		default:
			return scheme + "://xxxxx@" + master + rest[at:]
		}
	}
	return scheme + "://xxxxx" + rest[at:]
}

// ValidSentinelMaster reports whether s can be a sentinel master's name
// in a store URL ("redis+sentinel://[user:password@]MASTER@HOST:PORT,…"):
// one or more letters, digits, '.', '_' and '-'. The compiler redacts
// store URLs by it and rules/redisstore parses them by it.
func ValidSentinelMaster(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (c *Compiler) hostPort(s string, rng hcl.Range, attr string) string {
	if _, _, err := splitHostPort(s); err != nil {
		c.Errorf(rng, "Invalid "+attr, "%q is not a HOST:PORT address: %v", s, err)
	}
	return s
}

func splitHostPort(s string) (string, int, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("missing port")
	}
	port, err := strconv.Atoi(s[i+1:])
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("invalid port %q", s[i+1:])
	}
	return strings.Trim(s[:i], "[]"), port, nil
}

func (c *Compiler) prefixLen(n, max int, rng hcl.Range, attr string) int {
	if n < 0 || n > max {
		c.Errorf(rng, "Invalid "+attr, "%s must be between 0 and %d, got %d", attr, max, n)
		return max
	}
	// An IPv4 /16 or an IPv6 /32 is already a whole organisation's network.
	if coarse := max / 4; max == 32 && n < 16 || max == 128 && n < coarse {
		c.Warnf(rng, "Very coarse "+attr, "%s = %d puts at least 2^%d addresses in one counter; every client in such a network shares one budget", attr, n, max-n)
	}
	return n
}

func (c *Compiler) prefixes(expr hcl.Expression, attr string) []netip.Prefix {
	vals, rngs := c.StringList(expr, attr)
	var out []netip.Prefix
	for i, s := range vals {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil {
				pfx = netip.PrefixFrom(a, a.BitLen())
			} else {
				c.Errorf(rngs[i], "Invalid CIDR", "%q is not a CIDR such as \"10.0.0.0/8\" or \"2001:db8::/32\": %v", s, err)
				continue
			}
		}
		if pfx.Bits() == 0 {
			c.Warnf(rngs[i], "Every address trusted", "%q trusts every peer to name the client: any client can pick its own key with %s", s, attr)
		} else if pfx.Masked() != pfx {
			c.Warnf(rngs[i], "Host bits set", "%q has host bits set; it means %s", s, pfx.Masked())
		}
		out = append(out, pfx.Masked())
	}
	return out
}

// nat64Prefixes compiles nat64_prefixes: IPv6 prefixes, each with one of
// the lengths RFC 6052 §2.2 places an IPv4 address after (/32, /40, /48,
// /56, /64, /96), none overlapping another or a prefix whose embedded IPv4
// the edge already knows (ipv6.CheckNAT64Prefix). Host bits are masked
// with a warning, as in trusted_proxies.
func (c *Compiler) nat64Prefixes(expr hcl.Expression) []netip.Prefix {
	vals, rngs := c.StringList(expr, "nat64_prefixes")
	var out []netip.Prefix
	var outRngs []hcl.Range
	for i, s := range vals {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			c.Errorf(rngs[i], "Invalid NAT64 prefix", "%q is not an IPv6 prefix with its length, such as \"2001:db8:64::/96\": the length says where the IPv4 address sits (RFC 6052 §2.2)", s)
			continue
		}
		switch err := ipv6.CheckNAT64Prefix(pfx); {
		case err == nil:
		case errors.Is(err, ipv6.ErrNAT64NotIPv6):
			c.Errorf(rngs[i], "Invalid NAT64 prefix", "%q is %v: a NAT64 prefix looks like \"2001:db8:64::/96\"", s, err)
			continue
		case errors.Is(err, ipv6.ErrNAT64Length):
			c.Errorf(rngs[i], "Invalid NAT64 prefix length", "%q is a /%d, but RFC 6052 §2.2 places the IPv4 address only after a /32, /40, /48, /56, /64 or /96", s, pfx.Bits())
			continue
		default:
			c.Errorf(rngs[i], "Built-in IPv4 embedding", "%q %v: list only local NAT64 prefixes here", s, err)
			continue
		}
		if pfx.Masked() != pfx {
			c.Warnf(rngs[i], "Host bits set", "%q has host bits set; it means %s", s, pfx.Masked())
		}
		pfx = pfx.Masked()
		overlap := false
		for j, q := range out {
			if q.Overlaps(pfx) {
				c.Errorf(rngs[i], "Overlapping NAT64 prefixes", "%q overlaps %s at %s: an address in both would embed two different IPv4 addresses", s, q, outRngs[j])
				overlap = true
				break
			}
		}
		if !overlap {
			out, outRngs = append(out, pfx), append(outRngs, rngs[i])
		}
	}
	return out
}
