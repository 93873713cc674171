package rules

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/ipv6"
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
