package basic

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// compileIPCond compiles ip_in (not false) or ip_not_in (not true): a
// non-empty list of CIDRs ("10.0.0.0/8", "2001:db8::/32") or single
// addresses ("192.0.2.7", which means /32, or /128 for IPv6). Each bad
// element is an error at its position.
func compileIPCond(not bool) func(c *rules.Compiler, r *rules.Rule, a *hcl.Attribute) rules.Condition {
	return func(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
		errs := c.ErrorCount()
		list, rngs := c.StringList(a.Expr, a.Name)
		if c.ErrorCount() > errs {
			return nil
		}
		if len(list) == 0 {
			c.Errorf(a.Expr.Range(), "Empty "+a.Name, "%s needs at least one CIDR, such as [\"10.0.0.0/8\"]", a.Name)
			return nil
		}
		cond := &ipCond{not: not}
		ok := true
		for i, s := range list {
			pfx, good := condPrefix(c, s, rngs[i], a.Name)
			if !good {
				ok = false
				continue
			}
			cond.prefixes = append(cond.prefixes, pfx)
			cond.written = append(cond.written, s)
		}
		if !ok {
			return nil
		}
		// Longest first, as a reader of the list expects the most specific
		// network to be the one that decides (it makes no difference to the
		// answer, only to which prefix is tried first).
		slices.SortStableFunc(cond.prefixes, func(x, y netip.Prefix) int { return y.Bits() - x.Bits() })
		return cond
	}
}

// condPrefix parses s, one element of ip_in or ip_not_in (attr) at rng.
// An address without a length is a single host. An IPv4-mapped IPv6
// prefix (::ffff:10.0.0.0/104) and an address with a zone are errors: the
// client address as it counts is never IPv4-mapped (Request.Client) and
// has no zone, so such an element could never match.
func condPrefix(c *rules.Compiler, s string, rng hcl.Range, attr string) (netip.Prefix, bool) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		switch {
		case aerr == nil && a.Zone() != "":
			c.Errorf(rng, "Invalid CIDR", "%q has a zone; the client address as it counts never does, so it could never match", s)
			return netip.Prefix{}, false
		case aerr == nil:
			pfx = netip.PrefixFrom(a, a.BitLen())
		default:
			c.Errorf(rng, "Invalid CIDR", "%q is not a CIDR such as \"10.0.0.0/8\" or \"2001:db8::/32\", or an address such as \"192.0.2.7\": %v", s, err)
			return netip.Prefix{}, false
		}
	}
	if pfx.Addr().Is4In6() {
		v4 := "an IPv4 CIDR"
		if pfx.Bits() >= 96 {
			v4 = strconv.Quote(netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96).Masked().String())
		}
		c.Errorf(rng, "IPv4-mapped CIDR", "%q is IPv4-mapped; the client address counts as the IPv4 address it maps, so write %s", s, v4)
		return netip.Prefix{}, false
	}
	switch {
	case pfx.Bits() == 0:
		c.Warnf(rng, "Every address", "%q holds every %s address: %s is then a condition on the address family only", s, family(pfx), attr)
	case pfx.Masked() != pfx:
		c.Warnf(rng, "Host bits set", "%q has host bits set; it means %s", s, pfx.Masked())
	}
	return pfx.Masked(), true
}

// family names p's address family.
func family(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// ipCond is ip_in (not false) or ip_not_in (not true) on the client address
// as the rule counts it (Request.Client: the right-most untrusted hop, an
// IPv4 address embedded in IPv6 unwrapped). The address is always known,
// so the condition is never Invalid; an address that is not valid (which
// the gateway never passes) meets neither.
type ipCond struct {
	prefixes []netip.Prefix // masked, longest first
	written  []string       // as written, for String
	not      bool
}

// String returns the condition as a policy writes it.
func (c *ipCond) String() string {
	name := "ip_in"
	if c.not {
		name = "ip_not_in"
	}
	q := make([]string, len(c.written))
	for i, s := range c.written {
		q[i] = strconv.Quote(s)
	}
	return name + " = [" + strings.Join(q, ", ") + "]"
}

// Eval reports Present when the client address is in one of the prefixes
// (ip_in) or in none (ip_not_in), Missing otherwise. It does not allocate.
func (c *ipCond) Eval(req *rules.Request, _ *rules.Scratch) rules.Status {
	a := req.Client
	if !a.IsValid() {
		return rules.Missing
	}
	in := false
	for _, p := range c.prefixes {
		if p.Contains(a) {
			in = true
			break
		}
	}
	if in == c.not {
		return rules.Missing
	}
	return rules.Present
}

var _ rules.Condition = (*ipCond)(nil)
