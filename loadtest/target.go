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
func parseFlagTarget(name, raw string) (target, error) { return parseRemoteTarget(name, raw, false) }

// parseRemoteTarget is parseFlagTarget that, with allowRemote (the
// -allow-remote flag, for a staging node), also takes a host that is not
// loopback: any IP literal or DNS name, dialled as given. Without it a
// host off this machine is an error that names the flag to give.
func parseRemoteTarget(name, raw string, allowRemote bool) (target, error) {
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
	host, err := dialHost(name, raw, u.Hostname(), allowRemote)
	if err != nil {
		return target{}, err
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	addr := net.JoinHostPort(host, port)
	return target{base: "http://" + addr, addr: addr}, nil
}

// dialHost is the host to dial for a URL's host: a loopback one ("localhost"
// dialled as 127.0.0.1, so no resolver can send the traffic elsewhere), or
// with allowRemote any other non-empty host as given.
func dialHost(name, raw, host string, allowRemote bool) (string, error) {
	switch {
	case strings.EqualFold(host, "localhost"):
		return "127.0.0.1", nil
	case isLoopback(host):
		return host, nil
	case host == "":
		return "", fmt.Errorf("%s %q: no host", name, raw)
	case !allowRemote:
		return "", fmt.Errorf("%s %q: host %q is not a loopback address; loadtest only talks to this machine unless -allow-remote is given (for a staging node you run)", name, raw, host)
	}
	return host, nil
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
