package redisstore

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/node"
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
	if !node.ValidSentinelMaster(master) {
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
	var err error
	if o.SentinelAddrs, err = parseAddrs(hosts, "sentinel"); err != nil {
		return nil, err
	}
	return o, nil
}

// newFailover returns the failover client of a sentinel URL (rest follows
// the scheme), configured as configure does a single Redis's: its fields
// copied from a redis.Options configure set, as configureCluster does.
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
	// The dialer serves the sentinels' connections and the master's; go-redis
	// does not support maintenance notifications on a failover client.
	fo.MaxRetries, fo.DialerRetries = o.MaxRetries, o.DialerRetries
	fo.DialTimeout, fo.Dialer, fo.ConnMaxIdleTime = o.DialTimeout, o.Dialer, o.ConnMaxIdleTime
	fo.PoolTimeout, fo.ReadTimeout, fo.WriteTimeout = o.PoolTimeout, o.ReadTimeout, o.WriteTimeout
	fo.ContextTimeoutEnabled, fo.Protocol, fo.DisableIdentity = o.ContextTimeoutEnabled, o.Protocol, o.DisableIdentity
	fo.PoolSize = o.PoolSize
	return redis.NewFailoverClient(fo), nil
}
