package node

import (
	"fmt"
	"strconv"
	"strings"
)

// Store addresses as the store block's url and the -store flag take them
// (docs/policy.md, "store"): checked, redacted for printing, and the
// sentinel master's name that rules/redisstore parses them by.

// ValidateStoreURL checks a store address as the policy's url and the -store
// flag take it: "redis://HOST:PORT/DB" (DB optional, 0-15 by default in
// Redis), "rediss://HOST:PORT/DB" (TLS), "redis+cluster://HOST:PORT,HOST:PORT"
// or "redis+sentinel://MASTER@HOST:PORT,HOST:PORT/DB" (sentinels; MASTER
// the name they monitor; "rediss+sentinel://" over TLS), each with
// optional "USER:PASSWORD@" credentials first (docs/policy.md, "store").
func ValidateStoreURL(s string) error {
	shown := RedactURL(s) // errors are printed and logged: never the password
	scheme, rest, ok := strings.Cut(s, "://")
	cluster := scheme == "redis+cluster"
	sentinel := scheme == "redis+sentinel" || scheme == "rediss+sentinel"
	if !ok || !cluster && !sentinel && scheme != "redis" && scheme != "rediss" {
		return fmt.Errorf("%q is not redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+cluster://HOST:PORT,HOST:PORT or redis+sentinel://MASTER@HOST:PORT,HOST:PORT", shown)
	}
	if strings.ContainsAny(rest, "?#") {
		return fmt.Errorf("%q: a store url takes no query; TLS settings and timeouts are store block attributes", shown)
	}
	at := strings.LastIndexByte(rest, '@')
	head := ""
	if at >= 0 {
		head, rest = rest[:at], rest[at+1:] // credentials (the last '@': a password may hold one)
	}
	if sentinel {
		if i := strings.LastIndexByte(head, '@'); i >= 0 {
			head = head[i+1:]
		}
		if !ValidSentinelMaster(head) {
			return fmt.Errorf("%q: want redis+sentinel://[USER:PASSWORD@]MASTER@HOST:PORT,HOST:PORT, MASTER the name the sentinels monitor (letters, digits, '.', '_', '-')", shown)
		}
	}
	hosts, db, hasDB := strings.Cut(rest, "/")
	if hasDB && db != "" {
		if cluster {
			return fmt.Errorf("%q: Redis Cluster has no database number", shown)
		}
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return fmt.Errorf("%q: database %q is not a number", shown, db)
		}
	}
	list := strings.Split(hosts, ",")
	if !cluster && !sentinel && len(list) != 1 {
		return fmt.Errorf("%q: several addresses need redis+cluster:// or redis+sentinel://", shown)
	}
	for _, h := range list {
		if _, _, err := splitHostPort(h); err != nil || h == "" {
			return fmt.Errorf("%q: %q is not HOST:PORT", shown, h)
		}
	}
	return nil
}

// RedactURL returns a store URL fit to print: its credentials, if any,
// replaced by "xxxxx" ("redis://xxxxx@10.0.0.1:6379/0"); a sentinel URL
// keeps its master's name ("redis+sentinel://xxxxx@mymaster@10.0.0.1:26379").
func RedactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	// The last '@': a password may hold '/' or '@' unescaped, and a store
	// URL's path (a database number) holds neither.
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return s
	}
	if scheme == "redis+sentinel" || scheme == "rediss+sentinel" {
		head := rest[:at]
		master := head[strings.LastIndexByte(head, '@')+1:]
		switch {
		case !ValidSentinelMaster(master):
			// Not a master's name: credentials without one, all hidden.
		case len(master) == len(head):
			return s // a master's name, no credentials
		default:
			return scheme + "://xxxxx@" + master + rest[at:]
		}
	}
	return scheme + "://xxxxx" + rest[at:]
}

// ValidSentinelMaster reports whether s can be a sentinel master's name
// in a store URL ("redis+sentinel://[user:password@]MASTER@HOST:PORT,…"):
// one or more letters, digits, '.', '_' and '-'. The compiler redacts
// store URLs by it and rules/redisstore parses them by it.
func ValidSentinelMaster(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
