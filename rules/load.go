package rules

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/ipv6"
	"github.com/edge-gateway/edge/otp"
)

// Defaults of the policy language (POLICY.md).
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultAdminListen  = "127.0.0.1:9901"
	DefaultUpstream     = "http://127.0.0.1:9000"
	DefaultMaxBodyBytes = 65536
	DefaultMaxKeys      = 100000
	DefaultStoreTimeout = 5 * time.Millisecond
	DefaultKeySecretEnv = "EDGE_KEY_SECRET"
	// MaxKeysLimit bounds a max_keys, the store's and a rule's: a key
	// budget travels in Op.MaxKeys, an int32.
	MaxKeysLimit = math.MaxInt32
)

// LoadFile reads and compiles the policy at path. See Load.
func LoadFile(path string) (*Policy, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read policy",
			Detail:   err.Error(),
		}}
	}
	return Load(path, src)
}

// Load parses and compiles a policy. It collects every diagnostic it can
// (each with the file, line and column of the offending value) instead of
// stopping at the first; a policy comes back only when there is no error.
// Warnings may come back with a valid policy.
func Load(filename string, src []byte) (*Policy, hcl.Diagnostics) {
	parser := hclparse.NewParser()
	f, diags := parser.ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diags
	}
	cfg, decodeDiags := decodeFile(f.Body)
	diags = append(diags, decodeDiags...)
	c := compiler{filename: filename}
	p := c.compile(&cfg)
	diags = append(diags, c.diags...)
	sortDiags(diags)
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
}

// decodeFile decodes each top-level block on its own, so a type error in
// one block (limit = "5") does not hide the semantic errors of the others.
// A block that fails to decode is left out of the compile.
func decodeFile(body hcl.Body) (fileConfig, hcl.Diagnostics) {
	var cfg fileConfig
	schema, _ := gohcl.ImpliedBodySchema(&cfg)
	content, diags := body.Content(schema)
	for _, b := range content.Blocks {
		var label string
		var labelRange hcl.Range
		if len(b.Labels) > 0 {
			label, labelRange = b.Labels[0], b.LabelRanges[0]
		}
		switch b.Type {
		case "edge":
			var x edgeBlock
			if d := gohcl.DecodeBody(b.Body, nil, &x); decoded(&diags, d) {
				x.DefRange = b.DefRange
				if cfg.Edge != nil {
					diags = append(diags, duplicateBlock(b, cfg.Edge.DefRange))
					continue
				}
				cfg.Edge = &x
			}
		case "store":
			var x storeBlock
			if d := gohcl.DecodeBody(b.Body, nil, &x); decoded(&diags, d) {
				x.Kind, x.KindRange, x.DefRange = label, labelRange, b.DefRange
				cfg.Stores = append(cfg.Stores, x)
			}
		case "identity":
			var x identityBlock
			if d := gohcl.DecodeBody(b.Body, nil, &x); decoded(&diags, d) {
				x.DefRange = b.DefRange
				cfg.Identity = &x
			}
		case "visitor":
			var x visitorBlock
			if d := gohcl.DecodeBody(b.Body, nil, &x); decoded(&diags, d) {
				x.DefRange = b.DefRange
				cfg.Visitor = &x
			}
		case "botscore":
			var x botscoreBlock
			if d := gohcl.DecodeBody(b.Body, nil, &x); decoded(&diags, d) {
				x.DefRange = b.DefRange
				cfg.Botscore = &x
			}
		case "rule":
			var x ruleBlock
			if d := gohcl.DecodeBody(b.Body, nil, &x); decoded(&diags, d) {
				x.Name, x.NameRange, x.DefRange = label, labelRange, b.DefRange
				cfg.Rules = append(cfg.Rules, x)
			}
		case "test":
			var x testBlock
			if d := gohcl.DecodeBody(b.Body, nil, &x); decoded(&diags, d) {
				x.Name, x.DefRange = label, b.DefRange
				cfg.Tests = append(cfg.Tests, x)
			}
		}
	}
	return cfg, diags
}

// decoded appends d to diags and reports whether the block decoded cleanly.
func decoded(diags *hcl.Diagnostics, d hcl.Diagnostics) bool {
	*diags = append(*diags, d...)
	return !d.HasErrors()
}

func duplicateBlock(b *hcl.Block, first hcl.Range) *hcl.Diagnostic {
	r := b.DefRange
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Duplicate " + b.Type + " block",
		Detail:   fmt.Sprintf("only one %s block is allowed; the first is at %s", b.Type, first),
		Subject:  &r,
	}
}

// sortDiags orders diagnostics by file position, so they read top to
// bottom; those without a position come first.
func sortDiags(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Start.Line != b.Start.Line:
			return a.Start.Line < b.Start.Line
		}
		return a.Start.Column < b.Start.Column
	})
}

type compiler struct {
	filename string
	diags    hcl.Diagnostics
}

func (c *compiler) warnf(rng hcl.Range, summary, format string, args ...any) {
	r := rng
	c.diags = append(c.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  &r,
	})
}

func (c *compiler) errorf(rng hcl.Range, summary, format string, args ...any) {
	r := rng
	c.diags = append(c.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  &r,
	})
}

func (c *compiler) compile(cfg *fileConfig) *Policy {
	p := &Policy{
		Filename:            c.filename,
		Listen:              DefaultListen,
		AdminListen:         DefaultAdminListen,
		Upstream:            DefaultUpstream,
		ForwardedHeader:     "X-Forwarded-For",
		IPv4Prefix:          32,
		IPv6Prefix:          64,
		MaxBodyBytes:        DefaultMaxBodyBytes,
		PathCaseInsensitive: true,
		KeySecretEnv:        DefaultKeySecretEnv,
		Store:               StoreConfig{Kind: "memory", MaxKeys: DefaultMaxKeys, Timeout: DefaultStoreTimeout, FleetSize: 1},
	}
	var trusted, nat64 []netip.Prefix
	kind := ipv6.XForwardedFor
	if e := cfg.Edge; e != nil {
		if e.Listen != nil {
			p.Listen = c.hostPort(*e.Listen, e.ListenRange, "listen")
		}
		if e.AdminListen != nil {
			p.AdminListen = c.hostPort(*e.AdminListen, e.AdminListenRange, "admin_listen")
		}
		if e.Upstream != nil {
			p.Upstream = *e.Upstream
			if u, err := url.Parse(p.Upstream); err != nil || u.Scheme != "http" || u.Host == "" {
				c.errorf(e.UpstreamRange, "Invalid upstream", "%q is not an http://HOST:PORT address", p.Upstream)
			}
		}
		trusted = c.prefixes(e.TrustedProxies, "trusted_proxies")
		nat64 = c.nat64Prefixes(e.NAT64Prefixes)
		if e.ForwardedHeader != nil {
			k, ok := ipv6.ParseHeaderKind(*e.ForwardedHeader)
			if !ok {
				c.errorf(e.ForwardedHeaderRange, "Invalid forwarded_header", "%q is not \"x-forwarded-for\" or \"forwarded\"", *e.ForwardedHeader)
			}
			kind = k
			if k == ipv6.Forwarded {
				p.ForwardedHeader = "Forwarded"
			}
		}
		if e.IPv4Prefix != nil {
			p.IPv4Prefix = c.prefixLen(*e.IPv4Prefix, 32, e.IPv4PrefixRange, "ipv4_prefix")
		}
		if e.IPv6Prefix != nil {
			p.IPv6Prefix = c.prefixLen(*e.IPv6Prefix, 128, e.IPv6PrefixRange, "ipv6_prefix")
		}
		if e.MaxBodyBytes != nil {
			p.MaxBodyBytes = *e.MaxBodyBytes
			if p.MaxBodyBytes < 1 || p.MaxBodyBytes > 64<<20 {
				c.errorf(e.MaxBodyBytesRange, "Invalid max_body_bytes", "max_body_bytes must be between 1 and %d bytes, got %d", 64<<20, p.MaxBodyBytes)
			}
		}
		if e.PathCase != nil {
			switch *e.PathCase {
			case "insensitive":
			case "sensitive":
				p.PathCaseInsensitive = false
			default:
				c.errorf(e.PathCaseRange, "Invalid path_case", "%q is not \"insensitive\" or \"sensitive\"", *e.PathCase)
			}
		}
		if e.DryRun != nil {
			p.DryRun = *e.DryRun
		}
		if e.KeySecretEnv != nil {
			p.KeySecretEnv = *e.KeySecretEnv
			if p.KeySecretEnv == "" {
				c.errorf(e.KeySecretEnvRange, "Invalid key_secret_env", "key_secret_env names an environment variable and cannot be empty")
			}
		}
	}
	p.Client = ipv6.New(ipv6.Options{Trusted: trusted, Header: kind, NAT64: nat64})
	c.store(cfg.Stores, &p.Store)
	c.unsupportedBlocks(cfg)
	p.Visitor = c.visitor(cfg.Visitor)
	p.Identity = c.identity(cfg.Identity)

	seen := map[string]hcl.Range{}
	for i := range cfg.Rules {
		rb := &cfg.Rules[i]
		if prev, dup := seen[rb.Name]; dup {
			c.errorf(rb.NameRange, "Duplicate rule", "a rule named %q is already defined at %s", rb.Name, prev)
			continue
		}
		seen[rb.Name] = rb.DefRange
		r := c.rule(rb, p)
		if r == nil {
			continue
		}
		r.Index = len(p.Rules)
		p.Rules = append(p.Rules, r)
		if r.Sensitive {
			p.Sensitive = true
		}
	}
	keyBudgets(p)
	p.headerNames = headerNames(p)
	return p
}

// headerNames lists the request headers p reads (Policy.HeaderNames).
func headerNames(p *Policy) []string {
	var names []string
	add := func(n string) {
		for _, have := range names {
			if strings.EqualFold(have, n) {
				return
			}
		}
		names = append(names, n)
	}
	for _, r := range p.Rules {
		for _, ch := range r.Key {
			if ch.Kind == CharHeader {
				add(string(ch.Name))
			}
		}
	}
	if id := p.Identity; id != nil {
		for _, srcs := range [][]otp.Source{id.Phone, id.OTPSession} {
			for _, s := range srcs {
				if s.Kind == otp.SourceHeader {
					add(s.Name)
				}
			}
		}
	}
	return names
}

// keyBudgets gives every counting rule that sets no max_keys, and the
// visitor mint budget, an equal share of the store's max_keys: ⌈max_keys ÷
// n⌉ each for n of them, so that together they hold about max_keys keys and
// a flood on one cannot evict another's (docs/memory-store.md). A rule's own
// max_keys comes on top.
func keyBudgets(p *Policy) {
	n := 0
	for _, r := range p.Rules {
		if r.Action != ActionDeny && !r.maxKeysSet {
			n++
		}
	}
	if p.Visitor != nil {
		n++
	}
	if n == 0 {
		return
	}
	share := max((p.Store.MaxKeys+n-1)/n, 1)
	for _, r := range p.Rules {
		if r.Action != ActionDeny && !r.maxKeysSet {
			r.MaxKeys = share
		}
	}
	if p.Visitor != nil {
		p.Visitor.MintMaxKeys = share
	}
}

// unsupportedBlocks refuses blocks whose features this build does not have
// yet, instead of silently ignoring what a security team wrote.
func (c *compiler) unsupportedBlocks(cfg *fileConfig) {
	if b := cfg.Botscore; b != nil {
		c.errorf(b.DefRange, "Not supported yet", "the botscore block is not available in this build")
	}
}

func (c *compiler) store(blocks []storeBlock, sc *StoreConfig) {
	for i := range blocks {
		b := &blocks[i]
		if i > 0 {
			c.errorf(b.DefRange, "Duplicate store", "only one store block is allowed; the first is at %s", blocks[0].DefRange)
			continue
		}
		switch b.Kind {
		case "memory":
			if b.URL != nil {
				c.errorf(b.URLRange, "Unexpected url", "the memory store takes no url")
			}
		case "redis":
			if b.URL == nil {
				c.errorf(b.DefRange, "Missing url", "store \"redis\" needs url, such as \"redis://127.0.0.1:6379/0\" or \"redis+cluster://10.0.0.1:7000,10.0.0.2:7000\"")
			} else if err := ValidateStoreURL(*b.URL); err != nil {
				c.errorf(b.URLRange, "Invalid url", "%v", err)
			}
			if b.MaxKeys != nil {
				c.errorf(b.MaxKeysRange, "Unexpected max_keys", "max_keys bounds the memory store; Redis is bounded by its own maxmemory")
			}
		default:
			c.errorf(b.KindRange, "Unknown store", "%q is not a store; want \"memory\" or \"redis\"", b.Kind)
		}
		sc.Kind = b.Kind
		if b.MaxKeys != nil {
			sc.MaxKeys = *b.MaxKeys
			if sc.MaxKeys < 1 || sc.MaxKeys > MaxKeysLimit {
				c.errorf(b.MaxKeysRange, "Invalid max_keys", "max_keys must be between 1 and %d, got %d", MaxKeysLimit, sc.MaxKeys)
				sc.MaxKeys = DefaultMaxKeys
			}
		}
		if b.URL != nil {
			sc.URL = *b.URL
		}
		if b.Timeout != nil {
			d, err := ParseDuration(*b.Timeout)
			if err != nil || d <= 0 {
				c.errorf(b.TimeoutRange, "Invalid timeout", "%q is not a positive duration such as \"5ms\"", *b.Timeout)
			} else if d > time.Second {
				c.errorf(b.TimeoutRange, "Timeout too long", "%q: a store call's budget sits on every request's path; keep it to a few milliseconds (at most 1s)", *b.Timeout)
			}
			sc.Timeout = d
		}
		if b.FleetSize != nil {
			sc.FleetSize = *b.FleetSize
			if sc.FleetSize < 1 {
				c.errorf(b.FleetSizeRange, "Invalid fleet_size", "fleet_size must be at least 1, got %d", sc.FleetSize)
			}
		}
	}
}

// ValidateStoreURL checks a store address as the policy's url and the -store
// flag take it: "redis://HOST:PORT/DB" (DB optional, 0-15 by default in
// Redis) or "redis+cluster://HOST:PORT,HOST:PORT".
func ValidateStoreURL(s string) error {
	shown := RedactURL(s) // errors are printed and logged: never the password
	rest, cluster := strings.CutPrefix(s, "redis+cluster://")
	if !cluster {
		var ok bool
		if rest, ok = strings.CutPrefix(s, "redis://"); !ok {
			return fmt.Errorf("%q is not redis://HOST:PORT/DB or redis+cluster://HOST:PORT,HOST:PORT", shown)
		}
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:] // credentials (the last '@': a password may hold one)
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
	if !cluster && len(list) != 1 {
		return fmt.Errorf("%q: several addresses need redis+cluster://", shown)
	}
	for _, h := range list {
		if _, _, err := splitHostPort(h); err != nil || h == "" {
			return fmt.Errorf("%q: %q is not HOST:PORT", shown, h)
		}
	}
	return nil
}

// RedactURL returns a store URL fit to print: its credentials, if any,
// replaced by "xxxxx" ("redis://xxxxx@10.0.0.1:6379/0").
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
	return scheme + "://xxxxx" + rest[at:]
}

func (c *compiler) hostPort(s string, rng hcl.Range, attr string) string {
	if _, _, err := splitHostPort(s); err != nil {
		c.errorf(rng, "Invalid "+attr, "%q is not a HOST:PORT address: %v", s, err)
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

func (c *compiler) prefixLen(n, max int, rng hcl.Range, attr string) int {
	if n < 0 || n > max {
		c.errorf(rng, "Invalid "+attr, "%s must be between 0 and %d, got %d", attr, max, n)
		return max
	}
	// An IPv4 /16 or an IPv6 /32 is already a whole organisation's network.
	if coarse := max / 4; max == 32 && n < 16 || max == 128 && n < coarse {
		c.warnf(rng, "Very coarse "+attr, "%s = %d puts at least 2^%d addresses in one counter; every client in such a network shares one budget", attr, n, max-n)
	}
	return n
}

// stringList decodes an optional list-of-strings attribute, keeping each
// element's range for diagnostics. A missing attribute gives nil.
func (c *compiler) stringList(expr hcl.Expression, attr string) ([]string, []hcl.Range) {
	if expr == nil || isNull(expr) {
		return nil, nil
	}
	items, diags := hcl.ExprList(expr)
	if diags.HasErrors() {
		c.errorf(expr.Range(), "Invalid "+attr, "%s must be a list of strings, such as [\"a\", \"b\"]", attr)
		return nil, nil
	}
	out := make([]string, 0, len(items))
	rngs := make([]hcl.Range, 0, len(items))
	for _, it := range items {
		v, d := it.Value(nil)
		if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			c.errorf(it.Range(), "Invalid "+attr, "each element of %s must be a string", attr)
			continue
		}
		out = append(out, v.AsString())
		rngs = append(rngs, it.Range())
	}
	return out, rngs
}

// intList decodes an optional list-of-numbers attribute.
func (c *compiler) intList(expr hcl.Expression, attr string) []int {
	if expr == nil || isNull(expr) {
		return nil
	}
	items, diags := hcl.ExprList(expr)
	if diags.HasErrors() {
		c.errorf(expr.Range(), "Invalid "+attr, "%s must be a list of numbers", attr)
		return nil
	}
	var out []int
	for _, it := range items {
		v, d := it.Value(nil)
		if d.HasErrors() || v.IsNull() || v.Type() != cty.Number {
			c.errorf(it.Range(), "Invalid "+attr, "each element of %s must be a number", attr)
			continue
		}
		bf := v.AsBigFloat()
		n, acc := bf.Int64()
		if acc != 0 || n < 100 || n > 599 {
			c.errorf(it.Range(), "Invalid "+attr, "%s holds HTTP statuses (100-599), got %s", attr, bf.String())
			continue
		}
		out = append(out, int(n))
	}
	return out
}

// isNull reports whether an optional expression attribute was left out
// (gohcl hands a synthetic null expression for absent attributes).
func isNull(expr hcl.Expression) bool {
	if len(expr.Variables()) > 0 {
		return false
	}
	v, d := expr.Value(nil)
	return !d.HasErrors() && v.IsNull()
}

func (c *compiler) prefixes(expr hcl.Expression, attr string) []netip.Prefix {
	vals, rngs := c.stringList(expr, attr)
	var out []netip.Prefix
	for i, s := range vals {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil {
				pfx = netip.PrefixFrom(a, a.BitLen())
			} else {
				c.errorf(rngs[i], "Invalid CIDR", "%q is not a CIDR such as \"10.0.0.0/8\" or \"2001:db8::/32\": %v", s, err)
				continue
			}
		}
		if pfx.Bits() == 0 {
			c.warnf(rngs[i], "Every address trusted", "%q trusts every peer to name the client: any client can pick its own key with %s", s, attr)
		} else if pfx.Masked() != pfx {
			c.warnf(rngs[i], "Host bits set", "%q has host bits set; it means %s", s, pfx.Masked())
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
func (c *compiler) nat64Prefixes(expr hcl.Expression) []netip.Prefix {
	vals, rngs := c.stringList(expr, "nat64_prefixes")
	var out []netip.Prefix
	var outRngs []hcl.Range
	for i, s := range vals {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			c.errorf(rngs[i], "Invalid NAT64 prefix", "%q is not an IPv6 prefix with its length, such as \"2001:db8:64::/96\": the length says where the IPv4 address sits (RFC 6052 §2.2)", s)
			continue
		}
		switch err := ipv6.CheckNAT64Prefix(pfx); {
		case err == nil:
		case errors.Is(err, ipv6.ErrNAT64NotIPv6):
			c.errorf(rngs[i], "Invalid NAT64 prefix", "%q is %v: a NAT64 prefix looks like \"2001:db8:64::/96\"", s, err)
			continue
		case errors.Is(err, ipv6.ErrNAT64Length):
			c.errorf(rngs[i], "Invalid NAT64 prefix length", "%q is a /%d, but RFC 6052 §2.2 places the IPv4 address only after a /32, /40, /48, /56, /64 or /96", s, pfx.Bits())
			continue
		default:
			c.errorf(rngs[i], "Built-in IPv4 embedding", "%q %v: list only local NAT64 prefixes here", s, err)
			continue
		}
		if pfx.Masked() != pfx {
			c.warnf(rngs[i], "Host bits set", "%q has host bits set; it means %s", s, pfx.Masked())
		}
		pfx = pfx.Masked()
		overlap := false
		for j, q := range out {
			if q.Overlaps(pfx) {
				c.errorf(rngs[i], "Overlapping NAT64 prefixes", "%q overlaps %s at %s: an address in both would embed two different IPv4 addresses", s, q, outRngs[j])
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

// ParseDuration parses a Go duration ("90s", "15m", "1h30m") and also
// accepts days ("1d", "7d12h"), as policies write periods in days.
func ParseDuration(s string) (time.Duration, error) {
	rest := s
	var days time.Duration
	if i := strings.IndexByte(rest, 'd'); i > 0 {
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		if n > 3650 {
			return 0, fmt.Errorf("duration %q is over ten years", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		rest = rest[i+1:]
		if rest == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(rest)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return days + d, nil
}

var knownMethodList = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

var knownMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, x := range knownMethodList {
		m[x] = true
	}
	return m
}()

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// suggest returns ` Did you mean "x"?` for the closest candidate, or "".
func suggest(got string, candidates []string) string {
	// Close enough to be a typo: at most a third of the word differs.
	best, bestD := "", min(4, len(got)/3+1)
	lower := strings.ToLower(got)
	for _, cand := range candidates {
		if d := levenshtein.Distance(lower, strings.ToLower(cand), nil); d < bestD {
			best, bestD = cand, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

func algorithmNamesList() []string {
	var out []string
	for a := Algorithm(0); a < numAlgorithms; a++ {
		if a != Distinct {
			out = append(out, a.String())
		}
	}
	return out
}

// charExamples show each prefixed characteristic in use.
var charExamples = map[CharKind]string{
	CharHeader: "header:X-Api-Key", CharCookie: "cookie:session", CharQuery: "query:client_id",
	CharJSON: "json:user.phone", CharForm: "form:phone",
}

// charNamesList lists the characteristics this build supports.
func charNamesList() []string {
	var out []string
	for n, k := range charNames {
		if charSupported[k] {
			out = append(out, n)
		}
	}
	for n, k := range charPrefixes {
		if charSupported[k] {
			out = append(out, n+":")
		}
	}
	sort.Strings(out)
	return out
}

func (c *compiler) rule(rb *ruleBlock, p *Policy) *Rule {
	r := &Rule{
		Name:       rb.Name,
		ID:         ruleID(rb.Name),
		Algorithm:  GCRA,
		IPv4Prefix: p.IPv4Prefix,
		IPv6Prefix: p.IPv6Prefix,
	}
	if rb.Name == "" {
		c.errorf(rb.NameRange, "Invalid rule name", "a rule needs a non-empty name")
	}
	ok := true
	fail := func(rng hcl.Range, summary, format string, args ...any) {
		c.errorf(rng, summary, format, args...)
		ok = false
	}

	methods, mrngs := c.stringList(rb.Methods, "methods")
	for i, m := range methods {
		u := strings.ToUpper(m)
		switch {
		case !isToken(u):
			fail(mrngs[i], "Invalid method", "%q is not an HTTP method", m)
			continue
		case !knownMethods[u]:
			c.warnf(mrngs[i], "Unusual method", "%q is not a standard HTTP method.%s", m, suggest(u, knownMethodList))
		}
		r.methods = append(r.methods, u)
	}
	paths, prngs := c.stringList(rb.Paths, "paths")
	if rb.Paths == nil || isNull(rb.Paths) {
		r.anyPath = true
	}
	for i, s := range paths {
		if !strings.HasPrefix(s, "/") {
			fail(prngs[i], "Invalid path", "%q must start with \"/\"", s)
			continue
		}
		pre, star := strings.CutSuffix(s, "*")
		if strings.Contains(pre, "*") {
			fail(prngs[i], "Invalid path", "%q: \"*\" is allowed only at the end, as in \"/api/*\"", s)
			continue
		}
		canon, cok := AppendCanonicalPath(nil, []byte(pre))
		if !cok {
			fail(prngs[i], "Invalid path", "%q is not a valid path", s)
			continue
		}
		m := string(AppendMatchPath(nil, canon, p.PathCaseInsensitive))
		switch {
		case star && m == "/":
			r.anyPath = true
		case star:
			r.prefixes = append(r.prefixes, m+"/")
		default:
			r.exact = append(r.exact, m)
		}
	}
	hosts, hostRngs := c.stringList(rb.Hosts, "hosts")
	for i, h := range hosts {
		// The request's host goes through AppendHost too: one spelling on
		// both sides (docs/host-and-path.md §1).
		s := strings.TrimSpace(h)
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() && a.Zone() == "" {
			s = "[" + s + "]" // a bare IPv6 address, which Host never spells
		}
		_, name, ok := AppendHost(nil, nil, []byte(s))
		if !ok {
			c.errorf(hostRngs[i], "Invalid host", "%q is not a host name (letters, digits, '-', '_' and dots), an IPv4 address or a bracketed IPv6 address, optionally with a port; the edge refuses requests naming such a host, so the rule could never match", h)
			continue
		}
		r.hosts = append(r.hosts, string(name))
	}

	if rb.Sensitive != nil {
		r.Sensitive = *rb.Sensitive
	}
	if rb.DryRun != nil {
		r.DryRun = *rb.DryRun
	}
	if rb.Action != nil {
		switch *rb.Action {
		case "limit":
		case "deny":
			r.Action = ActionDeny
		case "log":
			r.Action = ActionLog
		default:
			fail(rb.ActionRange, "Invalid action", "%q is not an action; want \"limit\", \"deny\" or \"log\".%s", *rb.Action, suggest(*rb.Action, []string{"limit", "deny", "log"}))
		}
	}

	// The key.
	keys, krngs := c.stringList(rb.Key, "key")
	seenChar := map[string]bool{}
	for i, k := range keys {
		ch, cok := c.characteristic(k, krngs[i])
		if !cok {
			ok = false
			continue
		}
		if seenChar[k] {
			fail(krngs[i], "Duplicate characteristic", "%q appears twice in key", k)
			continue
		}
		seenChar[k] = true
		r.Key = append(r.Key, ch)
	}
	if r.Action != ActionDeny && len(r.Key) == 0 && (rb.Key == nil || isNull(rb.Key)) {
		fail(rb.DefRange, "Missing key", "rule %q needs key = [...], such as [\"ip\"] (or [\"global\"] for one counter shared by all)", rb.Name)
	}

	// Algorithm and numbers.
	if rb.Algorithm != nil {
		a, aok := ParseAlgorithm(*rb.Algorithm)
		if !aok {
			fail(rb.AlgorithmRange, "Unknown algorithm", "%q is not an algorithm; want one of %s.%s", *rb.Algorithm, strings.Join(algorithmNamesList(), ", "), suggest(*rb.Algorithm, algorithmNamesList()))
		}
		r.Algorithm = a
	}
	if r.Action != ActionDeny {
		if rb.Limit == nil {
			fail(rb.DefRange, "Missing limit", "rule %q needs limit (requests per period)", rb.Name)
		} else if *rb.Limit < 1 {
			fail(rb.LimitRange, "Invalid limit", "limit must be at least 1, got %d", *rb.Limit)
		} else {
			r.Limit = *rb.Limit
		}
		if rb.Period == nil {
			fail(rb.DefRange, "Missing period", "rule %q needs period, a duration such as \"1m\" or \"1d\"", rb.Name)
		} else if d, err := ParseDuration(*rb.Period); err != nil {
			fail(rb.PeriodRange, "Invalid period", "%q is not a duration; write it like \"30s\", \"15m\", \"1h\" or \"1d\"", *rb.Period)
		} else if d <= 0 {
			fail(rb.PeriodRange, "Invalid period", "period must be positive, got %q", *rb.Period)
		} else if d%time.Microsecond != 0 {
			fail(rb.PeriodRange, "Invalid period", "%q: periods are counted in whole microseconds", *rb.Period)
		} else {
			r.Period = d
		}
		r.Burst = r.Limit
		if rb.Burst != nil {
			switch {
			case *rb.Burst < 1:
				fail(rb.BurstRange, "Invalid burst", "burst must be at least 1, got %d", *rb.Burst)
			case r.Algorithm != GCRA && r.Algorithm != TokenBucket && r.Algorithm != LeakyBucket:
				fail(rb.BurstRange, "Burst not used", "burst applies to gcra, token_bucket and leaky_bucket, not %s", r.Algorithm)
			default:
				r.Burst = *rb.Burst
			}
		}
		if ok && r.Limit > 0 && r.Period > 0 {
			if r.PeriodUS()/r.Limit < 1 {
				fail(rb.LimitRange, "Limit too fine", "%d per %s is an emission interval under 1µs; raise the period or lower the limit", r.Limit, r.Period)
			} else if err := ValidateLimits(r.Algorithm, r.Limit, r.Burst, r.PeriodUS()); err != nil {
				fail(rb.LimitRange, "Limit out of range", "%v", err)
			}
		}
	} else {
		if rb.Limit != nil {
			fail(rb.LimitRange, "Limit not used", "action = \"deny\" refuses every match; remove limit")
		}
	}

	if rb.Count != nil {
		switch *rb.Count {
		case "requests":
		case "attempts":
			r.Count = CountAttempts
		case "failures":
			fail(rb.CountRange, "Not supported yet", "count = \"failures\" is not available in this build")
		default:
			fail(rb.CountRange, "Invalid count", "%q is not a count mode; want \"requests\" or \"attempts\".%s", *rb.Count, suggest(*rb.Count, []string{"requests", "attempts"}))
		}
	}
	if rb.CountDistinct != nil {
		fail(rb.CountDistinctRange, "Not supported yet", "count_distinct is not available in this build")
	}
	if rb.ResetOnSuccess != nil {
		r.ResetOnSuccess = *rb.ResetOnSuccess
	}
	r.FailureStatus = c.intList(rb.FailureStatus, "failure_status")
	if r.FailureStatus == nil {
		r.FailureStatus = []int{401, 403}
	}
	r.SuccessStatus = c.intList(rb.SuccessStatus, "success_status")
	if r.SuccessStatus == nil {
		r.SuccessStatus = []int{200, 201, 204}
	}
	// Identity characteristics need their sources in the identity block.
	for _, ch := range r.Key {
		switch ch.Kind {
		case CharPhone, CharPhoneRange, CharPhoneCountry:
			if p.Identity == nil || len(p.Identity.Phone) == 0 {
				fail(rb.DefRange, "Missing identity source", "rule %q counts per phone; list where the phone comes from in identity { phone = [...] }", rb.Name)
			}
		case CharOTPSession:
			if p.Identity == nil || len(p.Identity.Phone) == 0 || len(p.Identity.OTPSession) == 0 {
				fail(rb.DefRange, "Missing identity source", "rule %q counts per OTP session; list the phone and otp_session sources in identity { }", rb.Name)
			}
		}
	}
	if w := rb.When; w != nil {
		c.when(w, r, p)
	}
	hasVisitor := false
	for _, ch := range r.Key {
		if ch.Kind == CharVisitor {
			hasVisitor = true
		}
	}
	if hasVisitor && p.Visitor == nil {
		fail(rb.DefRange, "Missing visitor block", "rule %q counts per visitor; add a visitor { } block (cookie and secrets of the visitor IDs)", rb.Name)
	}
	if hasVisitor && r.Limit > 0 {
		// Every visitor rule holds all visitors of one IP to a ceiling, so
		// stockpiled IDs cannot multiply a client's budget (default 10 ×
		// limit, POLICY.md).
		r.IPCeiling = 10 * r.Limit
		if rb.IPCeiling != nil {
			r.IPCeiling = *rb.IPCeiling
			if r.IPCeiling < r.Limit {
				fail(rb.IPCeilingRange, "Invalid ip_ceiling", "ip_ceiling %d is below the rule's limit %d: one visitor alone would hit it", r.IPCeiling, r.Limit)
			}
		}
		r.CeilingBurst = ceilDiv(r.IPCeiling*r.Burst, r.Limit)
		if ok && r.Period > 0 {
			if err := ValidateLimits(r.Algorithm, r.IPCeiling, r.CeilingBurst, r.PeriodUS()); err != nil {
				rng := rb.IPCeilingRange
				if rb.IPCeiling == nil {
					rng = rb.LimitRange // the default ceiling, 10 × limit
				}
				fail(rng, "ip_ceiling out of range", "the IP ceiling of %d: %v", r.IPCeiling, err)
			}
		}
	} else if rb.IPCeiling != nil && !hasVisitor {
		// (A visitor rule whose limit is invalid has its own diagnostic.)
		fail(rb.IPCeilingRange, "ip_ceiling without visitor", "ip_ceiling applies to rules keyed on \"visitor\"")
	}

	r.OnStoreError = FailOpen
	if r.Sensitive {
		r.OnStoreError = FailClosed
	}
	if rb.OnStoreError != nil {
		switch *rb.OnStoreError {
		case "allow":
			r.OnStoreError = FailOpen
		case "deny":
			r.OnStoreError = FailClosed
		case "local":
			r.OnStoreError = FailLocal
		default:
			fail(rb.OnStoreErrorRange, "Invalid on_store_error", "%q is not a failure mode; want \"deny\", \"allow\" or \"local\"", *rb.OnStoreError)
		}
	}
	if rb.IPv4Prefix != nil {
		r.IPv4Prefix = c.prefixLen(*rb.IPv4Prefix, 32, rb.IPv4PrefixRange, "ipv4_prefix")
	}
	if rb.IPv6Prefix != nil {
		r.IPv6Prefix = c.prefixLen(*rb.IPv6Prefix, 128, rb.IPv6PrefixRange, "ipv6_prefix")
	}
	if rb.MaxKeys != nil {
		switch {
		case r.Action == ActionDeny:
			fail(rb.MaxKeysRange, "Unused max_keys", "action = \"deny\" counts nothing, so it holds no keys; remove max_keys")
		case *rb.MaxKeys < 1 || *rb.MaxKeys > MaxKeysLimit:
			fail(rb.MaxKeysRange, "Invalid max_keys", "max_keys must be between 1 and %d, got %d", MaxKeysLimit, *rb.MaxKeys)
		default:
			r.MaxKeys, r.maxKeysSet = *rb.MaxKeys, true
		}
	}
	r.MissingIdentity = IdentitySkip
	if r.Sensitive {
		r.MissingIdentity = IdentityReject
	}
	r.InvalidIdentity = IdentityReject
	if rb.MissingIdentity != nil {
		r.MissingIdentity = c.identityMode(*rb.MissingIdentity, rb.MissingIdentityRange, "missing_identity")
	}
	if rb.InvalidIdentity != nil {
		r.InvalidIdentity = c.identityMode(*rb.InvalidIdentity, rb.InvalidIdentityRange, "invalid_identity")
	}
	if !ok {
		return nil
	}
	return r
}

// when compiles a rule's conditions. This build knows visitor_valid; the
// others belong to blocks not available yet and are refused by name.
func (c *compiler) when(w *whenBlock, r *Rule, p *Policy) {
	if w.VisitorValid != nil {
		if p.Visitor == nil {
			c.errorf(w.DefRange, "Missing visitor block", "visitor_valid needs a visitor { } block")
		}
		v := *w.VisitorValid
		r.WhenVisitorValid = &v
	}
	for _, pc := range []struct {
		expr hcl.Expression
		attr string
		not  bool
	}{{w.PhoneCountryIn, "phone_country_in", false}, {w.PhoneCountryNotIn, "phone_country_not_in", true}} {
		if isNull(pc.expr) {
			continue
		}
		if p.Identity == nil || len(p.Identity.Phone) == 0 {
			c.errorf(pc.expr.Range(), "Missing identity source", "%s needs identity { phone = [...] }", pc.attr)
		}
		list, rngs := c.stringList(pc.expr, pc.attr)
		cond := &PhoneCountryCond{Not: pc.not}
		for i, cc := range list {
			if len(cc) != 2 || strings.ToUpper(cc) != cc {
				c.errorf(rngs[i], "Invalid country", "%q is not an ISO 3166 alpha-2 code such as \"US\"", cc)
				continue
			}
			cond.Countries = append(cond.Countries, cc)
		}
		r.WhenPhoneCountry = append(r.WhenPhoneCountry, cond)
	}
	for name, set := range map[string]bool{
		"bot_score_below": w.BotScoreBelow != nil, "hosting": w.Hosting != nil,
		"asn_in": !isNull(w.ASNIn), "country_in": !isNull(w.CountryIn), "country_not_in": !isNull(w.CountryNotIn),
	} {
		if set {
			c.errorf(w.DefRange, "Not supported yet", "the %s condition is not available in this build", name)
		}
	}
}

// identity compiles the identity block: where phones, accounts and OTP
// sessions come from, each a list of sources tried in order.
func (c *compiler) identity(b *identityBlock) *IdentityConfig {
	if b == nil {
		return nil
	}
	id := &IdentityConfig{PhoneRegion: "US"}
	if b.PhoneRegion != nil {
		id.PhoneRegion = strings.ToUpper(*b.PhoneRegion)
		if !otp.ValidRegion(id.PhoneRegion) {
			c.errorf(b.PhoneRegionRange, "Invalid phone_region", "%q is not a region phone numbers are known for; use an ISO 3166 alpha-2 code such as \"US\"", *b.PhoneRegion)
		}
	}
	id.Phone = c.sources(b.Phone, "phone")
	id.OTPSession = c.sources(b.OTPSession, "otp_session")
	if !isNull(b.Account) {
		c.errorf(b.Account.Range(), "Not supported yet", "account identities (login rules) are not available in this build")
	}
	return id
}

func (c *compiler) sources(expr hcl.Expression, attr string) []otp.Source {
	list, rngs := c.stringList(expr, attr)
	var out []otp.Source
	for i, s := range list {
		src, err := otp.ParseSource(s)
		if err != nil {
			c.errorf(rngs[i], "Invalid source", "%v; sources are json:PATH, form:NAME, header:NAME, query:NAME or cookie:NAME", err)
			continue
		}
		out = append(out, src)
	}
	return out
}

// visitor compiles the visitor block (POLICY.md defaults).
func (c *compiler) visitor(b *visitorBlock) *VisitorConfig {
	if b == nil {
		return nil
	}
	v := &VisitorConfig{
		Cookie: "__edge_vid", SecretEnv: "EDGE_VISITOR_SECRETS", MintLimit: 10,
		MintPeriod: time.Minute, MaxAge: 720 * time.Hour, Secure: true,
	}
	if b.Cookie != nil {
		v.Cookie = *b.Cookie
		if !isToken(v.Cookie) {
			c.errorf(b.DefRange, "Invalid cookie", "%q is not a cookie name", v.Cookie)
		}
	}
	if b.SecretEnv != nil {
		v.SecretEnv = *b.SecretEnv
	}
	if b.MintLimit != nil {
		v.MintLimit = int64(*b.MintLimit)
		if v.MintLimit < 1 {
			c.errorf(b.MintLimitRange, "Invalid mint_limit", "mint_limit must be at least 1, got %d", v.MintLimit)
		}
	}
	if b.MintPeriod != nil {
		d, err := ParseDuration(*b.MintPeriod)
		if err != nil || d <= 0 {
			c.errorf(b.MintPeriodRange, "Invalid mint_period", "%q is not a positive duration such as \"1m\"", *b.MintPeriod)
		} else {
			v.MintPeriod = d
		}
	}
	if b.MaxAge != nil {
		d, err := ParseDuration(*b.MaxAge)
		if err != nil || d <= 0 {
			c.errorf(b.MaxAgeRange, "Invalid max_age", "%q is not a positive duration such as \"720h\"", *b.MaxAge)
		} else {
			v.MaxAge = d
		}
	}
	if b.Secure != nil {
		v.Secure = *b.Secure
	}
	if v.MintLimit > 0 && v.MintPeriod > 0 {
		if err := ValidateLimits(GCRA, v.MintLimit, v.MintLimit, v.MintPeriod.Microseconds()); err != nil {
			c.errorf(b.MintLimitRange, "mint_limit out of range", "%v", err)
		}
	}
	return v
}

func (c *compiler) identityMode(s string, rng hcl.Range, attr string) IdentityMode {
	switch s {
	case "skip":
		return IdentitySkip
	case "reject":
		return IdentityReject
	}
	c.errorf(rng, "Invalid "+attr, "%q is not \"reject\" or \"skip\"", s)
	return IdentityReject
}

func (c *compiler) characteristic(s string, rng hcl.Range) (Characteristic, bool) {
	if k, ok := charNames[s]; ok {
		if !charSupported[k] {
			c.errorf(rng, "Not supported yet", "characteristic %q is not available in this build", s)
			return Characteristic{}, false
		}
		return Characteristic{Kind: k}, true
	}
	if pre, name, found := strings.Cut(s, ":"); found {
		if k, ok := charPrefixes[pre]; ok {
			if name == "" || len(name) > 256 || strings.ContainsAny(name, " \t\r\n") {
				c.errorf(rng, "Invalid characteristic", "%q needs a name after %q, such as %q", s, pre+":", charExamples[k])
				return Characteristic{}, false
			}
			if !charSupported[k] {
				c.errorf(rng, "Not supported yet", "characteristic %q is not available in this build", s)
				return Characteristic{}, false
			}
			ch := Characteristic{Kind: k, Name: []byte(name)}
			if k == CharJSON || k == CharForm {
				src, err := otp.ParseSource(s)
				if err != nil {
					c.errorf(rng, "Invalid characteristic", "%v", err)
					return Characteristic{}, false
				}
				ch.Source = src
			}
			return ch, true
		}
	}
	c.errorf(rng, "Unknown characteristic", "%q is not a characteristic; want one of %s.%s", s, strings.Join(charNamesList(), ", "), suggest(s, charNamesList()))
	return Characteristic{}, false
}
