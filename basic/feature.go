package basic

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/ipv6"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
)

// Feature returns the basic feature: the ip, route and global
// characteristics, and the ip_in and ip_not_in conditions
// (conditions.go).
func Feature() rules.Feature {
	return rules.Feature{
		Name: "basic",
		Characteristics: []rules.CharacteristicType{
			{Name: "ip", Tag: rules.TagIP, Compile: func(_ *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic { return ipChar{r} }},
			{Name: "route", Tag: rules.TagRoute, Compile: func(*rules.Compiler, *rules.Rule, string, hcl.Range) rules.Characteristic { return routeChar{} }},
			{Name: "global", Tag: rules.TagGlobal, Shared: true, Compile: func(*rules.Compiler, *rules.Rule, string, hcl.Range) rules.Characteristic { return globalChar{} }},
		},
		Conditions: []rules.ConditionType{
			{Name: "ip_in", Compile: compileIPCond(false)},
			{Name: "ip_not_in", Compile: compileIPCond(true)},
		},
	}
}

// ipChar is "ip": the client address grouped by the rule's prefixes
// (ipv4_prefix, ipv6_prefix; docs/client-address.md).
type ipChar struct{ r *rules.Rule }

// AppendValue appends the client address (Request.Client) masked to the
// rule's prefix of its family (ipv6.AppendKey); it is always Present.
func (c ipChar) AppendValue(buf []byte, req *rules.Request, _ *rules.Scratch) ([]byte, rules.Status) {
	return ipv6.AppendKey(buf, req.Client, c.r.IPv4Prefix, c.r.IPv6Prefix), rules.Present
}

// AppendText is an address as the client address counts, for forgive
// (rules.TextCharacteristic): parsed, its embedded IPv4 address when it
// has one (ipv6.Extractor.Counted, with the policy's NAT64 prefixes),
// grouped by the rule's prefixes.
func (c ipChar) AppendText(buf []byte, text string, p *rules.Policy) ([]byte, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(text))
	if err != nil {
		return buf, fmt.Errorf("not an IP address: %w", err)
	}
	var x *ipv6.Extractor
	if p != nil {
		x = p.Client
	}
	return ipv6.AppendKey(buf, x.Counted(a), c.r.IPv4Prefix, c.r.IPv6Prefix), nil
}

// routeChar is "route": the match form of the path.
type routeChar struct{}

// AppendValue appends the request's match-form path; it is always
// Present.
func (routeChar) AppendValue(buf []byte, req *rules.Request, _ *rules.Scratch) ([]byte, rules.Status) {
	return rules.AppendValue(buf, req.Path), rules.Present
}

// AppendText is a path as a request for it is matched: canonicalised,
// then in the policy's match form.
func (routeChar) AppendText(buf []byte, text string, p *rules.Policy) ([]byte, error) {
	canon, ok := route.AppendCanonicalPath(nil, []byte(text))
	if !ok || len(text) == 0 || text[0] != '/' {
		return buf, errors.New("not a path a request could carry (it starts with /)")
	}
	return rules.AppendValue(buf, route.AppendMatchPath(nil, canon, p != nil && p.PathCaseInsensitive)), nil
}

// globalChar is "global": one counter shared by every request.
type globalChar struct{}

// AppendValue appends nothing: every request has the one value.
func (globalChar) AppendValue(buf []byte, _ *rules.Request, _ *rules.Scratch) ([]byte, rules.Status) {
	return buf, rules.Present
}

// AppendText is global's one value: none, whatever the text.
func (globalChar) AppendText(buf []byte, _ string, _ *rules.Policy) ([]byte, error) { return buf, nil }

var (
	_ rules.TextCharacteristic = ipChar{}
	_ rules.TextCharacteristic = routeChar{}
	_ rules.TextCharacteristic = globalChar{}
)
