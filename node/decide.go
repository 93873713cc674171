package node

import (
	"net/netip"
	"strings"

	"github.com/edge-gateway/edge/rules"
)

// The decision-only listener (issue 14, item 7; docs/deploying.md,
// "Decision-only mode"): decide_listen = "HOST:PORT" opens a listener on
// which every request describes another one (NGINX auth_request, Envoy
// ext_authz), decided by the same rules and counters and never proxied.
// Once every rule is compiled, decideRules checks the rules against what a
// described request carries.

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

// decideRules (the node's Feature.PolicyDone) checks the policy's rules against what a described request can carry
// (docs/deploying.md, "Decision-only mode"), once every rule is compiled;
// nothing without decide_listen.
//
//   - A rule whose key, count_distinct, stages' characteristics (a
//     known_visitors' known_by: Resolver) or when { } condition reads the
//     body (json:, form:, an identity { } source in the
//     body) cannot be decided there: NGINX's auth_request sends no body.
//     Its identity would be missing on every described request, so its
//     missing_identity would either let a flood through (skip) or refuse
//     every login (reject). An enforcing one (action limit or deny, not
//     dry_run) is an error; a log, skip or dry-run one a warning.
//   - A rule with count = "failures", reset_on_success or known_visitors
//     needs the origin's answer, which the decide listener never sees:
//     there every request it counts stays counted (it is stricter, never
//     looser). A warning; so is settle_from, which behaviour/cost warns
//     of (its estimate stands).
func decideRules(c *rules.Compiler) {
	p := c.Policy()
	if p.DecideListen == "" {
		return
	}
	for _, r := range p.Rules {
		if ReadsBody(p, r) {
			if (r.Action == rules.ActionLimit || r.Action == rules.ActionDeny) && !r.DryRun {
				c.Errorf(r.DefRange, "Rule reads the body under decide_listen",
					"rule %q reads the request body (a json: or form: field, or an identity { } source in the body), which a described request does not carry (NGINX's auth_request sends no body): on the decision-only listener its identity would be missing on every request, so it would either let a flood through or refuse every one. Key it on what the described request carries (ip, header:, cookie:, query:), or decide it on the proxy listener of a node without decide_listen (docs/deploying.md, \"Decision-only mode\")", r.Name)
			} else {
				c.Warnf(r.DefRange, "Rule reads the body under decide_listen",
					"rule %q reads the request body, which a described request does not carry: on the decision-only listener its identity is missing on every request and its missing_identity answers (docs/deploying.md, \"Decision-only mode\")", r.Name)
			}
		}
		if len(r.Hooks) > 0 {
			c.Warnf(r.DefRange, "Rule needs the origin's answer under decide_listen",
				"rule %q has count = \"failures\", reset_on_success or known_visitors, which need the origin's answer; the decision-only listener never sees it, so every request it counts there stays counted (no refund, no reset, no known-visitor marker) (docs/deploying.md, \"Decision-only mode\")", r.Name)
		}
	}
}

// ReadsBody reports whether rule r reads the request body to decide: its
// key, count_distinct, its stages' characteristics (Resolver) or when { }
// conditions, resolved for an empty request (no header, cookie, query or
// body, so that every identity source in a list is tried), ask
// Fields.Body for it or mark the body parsed. Features are opaque to
// rules, so this asks them rather than knowing them by name.
func ReadsBody(p *rules.Policy, r *rules.Rule) (reads bool) {
	f := &bodyProbe{}
	sc := rules.NewScratch(4)
	req := &rules.Request{
		Method: []byte("POST"),
		Host:   []byte("example.com"),
		Path:   []byte("/"),
		Client: netip.AddrFrom4([4]byte{192, 0, 2, 1}),
		Fields: f,
	}
	probe := func(ch rules.Characteristic) {
		if ch == nil {
			return
		}
		sc.Begin(p)
		_, _ = ch.AppendValue(nil, req, sc)
		reads = reads || f.body || sc.BodyParsed
		sc.BodyParsed = false
	}
	defer func() {
		// A feature that cannot resolve an empty request says nothing
		// about the body: assume the worst.
		if recover() != nil {
			reads = true
		}
	}()
	for _, ch := range r.Key {
		probe(ch)
	}
	probe(r.Distinct)
	for _, st := range r.Stages() {
		if rs, ok := st.(rules.Resolver); ok {
			for _, ch := range rs.Resolves() {
				probe(ch)
			}
		}
	}
	for _, cond := range r.Conditions {
		sc.Begin(p)
		_ = cond.Eval(req, sc)
		reads = reads || f.body || sc.BodyParsed
		sc.BodyParsed = false
	}
	return reads
}

// bodyProbe is an empty request's rules.Fields that records a call of Body.
type bodyProbe struct{ body bool }

func (f *bodyProbe) Header([]byte) []byte { return nil }
func (f *bodyProbe) Cookie([]byte) []byte { return nil }
func (f *bodyProbe) Query([]byte) []byte  { return nil }
func (f *bodyProbe) RawQuery() []byte     { return nil }
func (f *bodyProbe) Cookies() []byte      { return nil }
func (f *bodyProbe) Body() (contentType, body []byte) {
	f.body = true
	return nil, nil
}
