package redisstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Redis Sentinel. A "redis+sentinel://" URL names the master by the name
// the sentinels monitor it under and lists sentinels to ask; the store is
// go-redis' failover client, a *redis.Client whose dialer asks a sentinel
// for the master's address before each new connection and which drops its
// connections to the old master when a sentinel announces a switch
// (+switch-master). Every call is still one script call on the master of
// the moment, never retried (MaxRetries -1): a call in flight when the
// master fails fails, and the caller applies each rule's on_store_error;
// coalescing works as on a single Redis. docs/deploying.md ("Redis over
// TLS, ACLs and Sentinel") has what a failover can forget.

// sentinelSchemes are the URL schemes of a Sentinel-managed Redis, plain
// and over TLS (sentinels and data nodes alike).
const (
	sentinelScheme    = "redis+sentinel://"
	sentinelTLSScheme = "rediss+sentinel://"
)

// parseSentinelURL parses what follows "redis+sentinel://":
// "[user:password@]MASTER@HOST:PORT[,HOST:PORT…][/DB]". The credentials
// are the master's (and its replicas'); sentinels that require their own
// come from Options.SentinelUsername and SentinelPassword. MASTER is
// letters, digits, '.', '_' and '-'.
func parseSentinelURL(rest string) (*redis.FailoverOptions, error) {
	o := &redis.FailoverOptions{}
	if strings.ContainsAny(rest, "?#") {
		return nil, errors.New("redisstore: a redis+sentinel URL takes no query or fragment")
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return nil, errors.New("redisstore: a redis+sentinel URL names its master: redis+sentinel://MASTER@HOST:PORT,HOST:PORT")
	}
	head, hosts := rest[:at], rest[at+1:]
	master := head
	if i := strings.LastIndexByte(head, '@'); i >= 0 {
		// USER:PASSWORD, each percent-decoded; split here rather than by
		// url.Parse, which would end the authority at a '/' in the password.
		master = head[i+1:]
		user, pass, _ := strings.Cut(head[:i], ":")
		var errU, errP error
		o.Username, errU = url.PathUnescape(user)
		o.Password, errP = url.PathUnescape(pass)
		if errU != nil || errP != nil {
			return nil, errors.New("redisstore: parsing sentinel URL credentials: malformed percent-encoding") // never echo them
		}
	}
	if !validMasterName(master) {
		return nil, errors.New("redisstore: a sentinel master name is letters, digits, '.', '_' and '-' (redis+sentinel://[user:password@]MASTER@HOST:PORT,…)")
	}
	o.MasterName = master
	hosts, db, hasDB := strings.Cut(hosts, "/")
	if hasDB && db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("redisstore: sentinel URL database %q is not a number", db)
		}
		o.DB = n
	}
	if hosts == "" {
		return nil, errors.New("redisstore: a redis+sentinel URL needs at least one sentinel HOST:PORT")
	}
	for addr := range strings.SplitSeq(hosts, ",") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("redisstore: sentinel %q: %w", addr, err)
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 || host == "" {
			return nil, fmt.Errorf("redisstore: sentinel %q: want host:port", addr)
		}
		o.SentinelAddrs = append(o.SentinelAddrs, addr)
	}
	return o, nil
}

// validMasterName reports whether s is a master name a sentinel URL takes.
func validMasterName(s string) bool {
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

// newFailover returns the failover client of a sentinel URL (rest follows
// the scheme), configured as configure does a single Redis's.
func newFailover(rest string, opts Options, useTLS bool, late *lateReads) (*redis.Client, error) {
	fo, err := parseSentinelURL(rest)
	if err != nil {
		return nil, err
	}
	if fo.TLSConfig, err = tlsConfig(opts, useTLS); err != nil {
		return nil, err
	}
	if opts.Password != "" {
		fo.Password = opts.Password
	}
	fo.SentinelUsername, fo.SentinelPassword = opts.SentinelUsername, opts.SentinelPassword
	o := &redis.Options{TLSConfig: fo.TLSConfig}
	configure(o, opts, late)
	fo.MaxRetries = o.MaxRetries
	fo.DialTimeout = o.DialTimeout
	fo.Dialer = o.Dialer // the sentinels' connections and the master's
	fo.DialerRetries = o.DialerRetries
	fo.PoolTimeout = o.PoolTimeout
	fo.ReadTimeout = o.ReadTimeout
	fo.WriteTimeout = o.WriteTimeout
	fo.ContextTimeoutEnabled = o.ContextTimeoutEnabled
	fo.Protocol = o.Protocol
	fo.DisableIdentity = o.DisableIdentity
	fo.ConnMaxIdleTime = o.ConnMaxIdleTime
	if opts.PoolSize > 0 {
		fo.PoolSize = opts.PoolSize
	}
	return redis.NewFailoverClient(fo), nil
}
