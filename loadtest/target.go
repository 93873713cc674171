package main

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// target is the edge node a scenario talks to.
type target struct {
	base string // "http://host:port", no trailing slash
	addr string // host:port to dial

	// metrics is the node's Prometheus endpoint (throughput:
	// -target-metrics, -compare-metrics); zero: none.
	metrics metricsSource
}

// parseTarget accepts only plain-HTTP base URLs whose host is a loopback
// address (127.0.0.0/8, ::1, IPv4-mapped or not) or "localhost" (dialled as
// 127.0.0.1), with no path beyond "/".
func parseTarget(raw string) (target, error) { return parseFlagTarget("-target", raw) }

// parseFlagTarget is parseTarget for the flag named name, which its errors
// mention.
func parseFlagTarget(name, raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("parsing %s: %w", name, err)
	}
	if u.Scheme != "http" {
		return target{}, fmt.Errorf("%s %q: scheme must be http", name, raw)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return target{}, fmt.Errorf("%s %q: want a base URL such as http://127.0.0.1:18080", name, raw)
	}
	host := u.Hostname()
	if !isLoopback(host) {
		return target{}, fmt.Errorf("%s %q: host %q is not a loopback address; loadtest only talks to this machine", name, raw, host)
	}
	if strings.EqualFold(host, "localhost") {
		// Dial the loopback address itself, so no resolver can send the
		// traffic elsewhere.
		host = "127.0.0.1"
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	addr := net.JoinHostPort(host, port)
	return target{base: "http://" + addr, addr: addr}, nil
}

// isLoopback reports whether host is "localhost" or a loopback IP literal.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return false
	}
	return a.Unmap().IsLoopback()
}
