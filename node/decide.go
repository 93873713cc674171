package node

import (
	"net/netip"
	"strings"
)

// The decision-only listener (issue 14, item 7; docs/deploying.md,
// "Decision-only mode"): decide_listen = "HOST:PORT" opens a listener on
// which every request describes another one (NGINX auth_request, Envoy
// ext_authz), decided by the same rules and counters and never proxied.
// rules checks the rules against it (rules/compile_decide.go).

// edgeDecide compiles decide_listen: a HOST:PORT that is neither the
// public nor the admin listener.
func (c *compiler) edgeDecide(e *edgeBlock) {
	if e.DecideListen == nil {
		return
	}
	addr := c.hostPort(*e.DecideListen, e.DecideListenRange, "decide_listen")
	for _, other := range [...]struct{ attr, addr string }{{"listen", c.cfg.Listen}, {"admin_listen", c.cfg.AdminListen}} {
		if sameListener(addr, other.addr) {
			c.Errorf(e.DecideListenRange, "Invalid decide_listen", "decide_listen %q is the %s address %q: the decision-only listener needs an address of its own", addr, other.attr, other.addr)
		}
	}
	c.n.DecideListen = addr
	if v, diags := e.TrustedProxies.Value(nil); !diags.HasErrors() && v.IsKnown() && (v.IsNull() || v.CanIterateElements() && v.LengthInt() == 0) {
		c.Warnf(e.DecideListenRange, "decide_listen without trusted_proxies",
			"the decision-only listener's peer is your proxy (NGINX, Envoy): unless its address is in trusted_proxies, every described request counts as coming from the proxy itself, and all clients share one budget (docs/deploying.md, \"Decision-only mode\")")
	}
}

// sameListener reports whether two HOST:PORT addresses would listen on one
// socket: the same port (not 0) and the same host, or a wildcard host
// ("", 0.0.0.0, ::) on either side.
func sameListener(a, b string) bool {
	ah, ap, err1 := splitHostPort(a)
	bh, bp, err2 := splitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp || ap == 0 {
		return false
	}
	wild := func(h string) bool {
		if h == "" {
			return true
		}
		ip, err := netip.ParseAddr(h)
		return err == nil && ip.IsUnspecified()
	}
	return strings.EqualFold(ah, bh) || wild(ah) || wild(bh)
}
