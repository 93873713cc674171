// Package ipv6 finds the client address of a request and turns it into
// counter keys.
//
// It owns three things:
//
//   - [ParseAddr], the one audited, allocation-free parser for addresses read
//     from request headers (netip.ParseAddr(string(b)) allocates, and its
//     errors allocate too);
//   - [Extractor], which knows the trusted proxies and reads the one
//     forwarding header the policy names (X-Forwarded-For or RFC 7239
//     Forwarded) from the right, so a client can never choose its own address;
//   - [Extractor.EmbeddedIPv4] and [Extractor.Counted], which count an IPv6
//     address that embeds an IPv4 address (6to4, Teredo, the NAT64
//     well-known prefix and the policy's local NAT64 prefixes,
//     IPv4-compatible) as that IPv4 address, so one IPv4 host gets one
//     budget however its address is spelled (docs/client-address.md);
//   - [Prefix] and [AppendKey], which mask an address to the policy's prefix
//     lengths (an IPv4 /32 and an IPv6 /64 by default) and encode it for
//     counter keys.
//
// Every address this package returns is unmapped (an IPv4-mapped IPv6
// address becomes IPv4) and carries no IPv6 zone, so one host always has one
// key; [Extractor.Client] also returns an embedded IPv4 address in place of
// the IPv6 address that carries it. An address that cannot be parsed never
// becomes an empty or shared key: the Extractor falls back to the socket
// peer instead.
//
// # Concurrency
//
// An Extractor is immutable once NewExtractor returns it and is safe for
// concurrent use by any number of goroutines; a reload builds a new one. The
// package has no mutable package-level state, and none of its functions
// retain the byte slices they are given.
//
// # Allocation
//
// ParseAddr, Extractor.Client, Extractor.AppendForwardedFor and
// Extractor.ClientAndForwardedFor (given a dst with room),
// Extractor.EmbeddedIPv4, Extractor.Counted, Prefix and AppendKey do not
// allocate; benchmarks and an AllocsPerRun test hold them to it.
package ipv6
