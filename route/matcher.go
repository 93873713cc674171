package route

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/internal/httpsyntax"
	"github.com/edge-gateway/edge/rules/hclattr"
)

// Matcher is what a rule (or a feature's block that matches requests as a
// rule does: known { }) selects by route: its methods, paths and hosts
// (docs/policy.md, "Matching"), compiled by Compile (the zero value
// matches no path; Compile of three nil expressions, every request). A Matcher is immutable once compiled and safe for
// concurrent use; Match allocates nothing.
type Matcher struct {
	methods  []string // upper case; empty means any method
	exact    []string // match-form paths, trailing slash dropped
	prefixes []string // match-form prefixes, ending in "/"
	anyPath  bool     // "/*" or no paths
	hosts    []string // lower case, no port; empty means any host
}

// Match reports whether a request matches m: its match-form path (from
// AppendMatchPath) is one of m's paths, its host name (AppendHost's name)
// one of m's hosts, and its method (upper case) or one of the override
// methods (AppendMethodTokens' output: tokens each followed by a space)
// one of m's methods.
func (m *Matcher) Match(method, overrides, path, host []byte) bool {
	if !m.matchPath(path) || !matchAny(m.hosts, host) {
		return false
	}
	if matchAny(m.methods, method) {
		return true
	}
	for o := overrides; len(o) > 0; {
		i := bytes.IndexByte(o, ' ')
		if i < 0 {
			return matchAny(m.methods, o)
		}
		if i > 0 && matchAny(m.methods, o[:i]) {
			return true
		}
		o = o[i+1:]
	}
	return false
}

// matchPath reports whether a match-form path is one of m's paths.
func (m *Matcher) matchPath(p []byte) bool {
	if m.anyPath {
		return true
	}
	for _, e := range m.exact {
		if string(p) == e {
			return true
		}
	}
	for _, pre := range m.prefixes {
		// "/api/*" matches "/api" and everything under "/api/".
		if len(p)+1 == len(pre) && string(p) == pre[:len(pre)-1] {
			return true
		}
		if len(p) >= len(pre) && string(p[:len(pre)]) == pre {
			return true
		}
	}
	return false
}

// matchAny reports whether v is one of list, or list is empty (any).
func matchAny(list []string, v []byte) bool {
	for _, x := range list {
		if string(v) == x {
			return true
		}
	}
	return len(list) == 0
}

// Methods returns the methods m matches, upper case (empty: any). The
// caller must not modify them.
func (m *Matcher) Methods() []string { return m.methods }

// Paths returns the match-form paths m matches, exact ones first and then
// prefixes ("/api/*"); empty means any path. For the admin API (GET
// /admin/rules); Match reads the compiled form.
func (m *Matcher) Paths() []string {
	if m.anyPath {
		return nil
	}
	ps := make([]string, 0, len(m.exact)+len(m.prefixes))
	ps = append(ps, m.exact...)
	for _, p := range m.prefixes {
		ps = append(ps, p+"*")
	}
	return ps
}

// Hosts returns the hosts m matches (lower case, no port); empty means any
// host. The caller must not modify them.
func (m *Matcher) Hosts() []string { return m.hosts }

// knownMethods are the standard HTTP methods: another is a warning.
var knownMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// Compile compiles the methods, paths and hosts attributes of a rule (or
// of a feature's block that matches requests as a rule does), each an
// optional list of strings, into a Matcher (docs/policy.md, "Matching").
// A path is "/exact" or "/prefix/*", folded as AppendMatchPath folds a
// request's (caseInsensitive: path_case = "insensitive"); a host is read
// by AppendHost, as a request's is. It returns the diagnostics, each at
// the element it is about (an unusual method is a warning), and false
// after an error that makes the matcher unusable; an invalid host is an
// error the matcher survives (the element is dropped).
func Compile(methodsExpr, pathsExpr, hostsExpr hcl.Expression, caseInsensitive bool) (m Matcher, diags hcl.Diagnostics, ok bool) {
	ok = true
	methods, mrngs, d := hclattr.StringList(methodsExpr, "methods")
	diags = append(diags, d...)
	for i, s := range methods {
		u := strings.ToUpper(s)
		switch {
		case !httpsyntax.IsToken(u):
			diags = append(diags, hclattr.Errorf(mrngs[i], "Invalid method", "%q is not an HTTP method", s))
			ok = false
			continue
		case !slices.Contains(knownMethods, u):
			diags = append(diags, hclattr.Warnf(mrngs[i], "Unusual method", "%q is not a standard HTTP method.%s", s, hclattr.Suggest(u, knownMethods)))
		}
		m.methods = append(m.methods, u)
	}
	paths, prngs, d := hclattr.StringList(pathsExpr, "paths")
	diags = append(diags, d...)
	m.anyPath = pathsExpr == nil || hclattr.IsNull(pathsExpr)
	for i, s := range paths {
		if err := m.addPath(s, caseInsensitive); err != "" {
			diags = append(diags, hclattr.Errorf(prngs[i], "Invalid path", "%q%s", s, err))
			ok = false
		}
	}
	hosts, hrngs, d := hclattr.StringList(hostsExpr, "hosts")
	diags = append(diags, d...)
	for i, h := range hosts {
		// The request's host goes through AppendHost too: one spelling on
		// both sides (docs/host-and-path.md §1).
		s := strings.TrimSpace(h)
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() && a.Zone() == "" {
			s = "[" + s + "]" // a bare IPv6 address, which Host never spells
		}
		_, name, hok := AppendHost(nil, nil, []byte(s))
		if !hok {
			diags = append(diags, hclattr.Errorf(hrngs[i], "Invalid host", "%q is not a host name (letters, digits, '-', '_' and dots), an IPv4 address or a bracketed IPv6 address, optionally with a port; the edge refuses requests naming such a host, so the rule could never match", h))
			continue
		}
		m.hosts = append(m.hosts, string(name))
	}
	return m, diags, ok
}

// addPath adds path s to m, or returns what is wrong with it: the rest of
// a detail that starts with s quoted.
func (m *Matcher) addPath(s string, caseInsensitive bool) string {
	if !strings.HasPrefix(s, "/") {
		return ` must start with "/"`
	}
	pre, star := strings.CutSuffix(s, "*")
	if strings.Contains(pre, "*") {
		return `: "*" is allowed only at the end, as in "/api/*"`
	}
	canon, ok := AppendCanonicalPath(nil, []byte(pre))
	if !ok {
		return " is not a valid path"
	}
	p := string(AppendMatchPath(nil, canon, caseInsensitive))
	switch {
	case star && p == "/":
		m.anyPath = true
	case star:
		m.prefixes = append(m.prefixes, p+"/")
	default:
		m.exact = append(m.exact, p)
	}
	return ""
}
