package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/ipv6"
	"github.com/edge-gateway/edge/route"
)

// The characteristics every request has, which rules provides itself: the
// client address, the route and the one global counter. Every other one is
// a feature's (docs/architecture.md, "Extension points").
var coreCharacteristics = []*CharacteristicType{
	{Name: "ip", Tag: TagIP, Compile: func(_ *Compiler, r *Rule, _ string, _ hcl.Range) Characteristic { return ipChar{r} }},
	{Name: "route", Tag: TagRoute, Compile: func(*Compiler, *Rule, string, hcl.Range) Characteristic { return routeChar{} }},
	{Name: "global", Tag: TagGlobal, Shared: true, Compile: func(*Compiler, *Rule, string, hcl.Range) Characteristic { return globalChar{} }},
}

// ipChar is "ip": the client address grouped by the rule's prefixes
// (ipv4_prefix, ipv6_prefix; docs/client-address.md).
type ipChar struct{ r *Rule }

func (c ipChar) AppendValue(buf []byte, req *Request, _ *Scratch) ([]byte, Status) {
	return ipv6.AppendKey(buf, req.Client, c.r.IPv4Prefix, c.r.IPv6Prefix), Present
}

// routeChar is "route": the match form of the path.
type routeChar struct{}

func (routeChar) AppendValue(buf []byte, req *Request, _ *Scratch) ([]byte, Status) {
	return AppendValue(buf, req.Path), Present
}

// globalChar is "global": one counter shared by every request.
type globalChar struct{}

func (globalChar) AppendValue(buf []byte, _ *Request, _ *Scratch) ([]byte, Status) {
	return buf, Present
}

// The core characteristics' text forms, for forgive (TextCharacteristic).

// AppendText is an address as the client address counts: parsed, its
// embedded IPv4 address when it has one (ipv6.Extractor.Counted, with the
// policy's NAT64 prefixes), grouped by the rule's prefixes.
func (c ipChar) AppendText(buf []byte, text string, p *Policy) ([]byte, error) {
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

// AppendText is a path as a request for it is matched: canonicalised,
// then in the policy's match form.
func (routeChar) AppendText(buf []byte, text string, p *Policy) ([]byte, error) {
	canon, ok := route.AppendCanonicalPath(nil, []byte(text))
	if !ok || len(text) == 0 || text[0] != '/' {
		return buf, errors.New("not a path a request could carry (it starts with /)")
	}
	return AppendValue(buf, route.AppendMatchPath(nil, canon, p != nil && p.PathCaseInsensitive)), nil
}

// AppendText is global's one value: none, whatever the text.
func (globalChar) AppendText(buf []byte, _ string, _ *Policy) ([]byte, error) { return buf, nil }

var (
	_ TextCharacteristic = ipChar{}
	_ TextCharacteristic = routeChar{}
	_ TextCharacteristic = globalChar{}
)
