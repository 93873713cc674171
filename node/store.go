package node

import (
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// The store block: its kind, its key budgets (network.go for the network
// shares) and its Redis connection attributes: TLS files, credentials
// from the environment, the dial budget (docs/policy.md, "store";
// docs/deploying.md, "Redis over TLS, ACLs and Sentinel").

// StoreConfig is the policy's `store` block.
type StoreConfig struct {
	// Kind is "memory" (the default) or "redis".
	Kind string
	// StoreKeys are the memory store's key budgets: max_keys,
	// network_share, network_ipv4_prefix and network_ipv6_prefix (the
	// rules read them too: rules.Node.Keys).
	rules.StoreKeys
	// URL is the Redis address for Kind "redis".
	URL string
	// Timeout is the per-call budget of a remote store (default 5ms).
	Timeout time.Duration
	// FleetSize divides limits for the "local" fallback (default 1).
	FleetSize int
	// DialTimeout bounds establishing one Redis connection (0: the
	// store's default, 1s).
	DialTimeout time.Duration
	// CAFile, CertFile, KeyFile (absolute paths, resolved against the
	// policy file's directory) and ServerName configure TLS to a
	// rediss:// or rediss+sentinel:// URL; empty: the system's CA pool,
	// no client certificate, the URL's host.
	CAFile, CertFile, KeyFile, ServerName string
	// PasswordEnv names the environment variable whose value replaces the
	// URL's password; SentinelUsername and SentinelPasswordEnv
	// authenticate to a sentinel URL's sentinels. Read at start, never
	// stored in the Policy.
	PasswordEnv, SentinelUsername, SentinelPasswordEnv string
	// ResetGrace is how long, once the node finds that Redis came back
	// without its data (its epoch gone: rules/redisstore's CheckEpoch),
	// the sensitive rules that do not fail open answer by their
	// on_store_error instead of counting from zero (0: not at all). At
	// most MaxResetGrace.
	ResetGrace time.Duration
}

// MaxResetGrace bounds a store's reset_grace: long enough to cover the
// windows a login or OTP rule counts over, short enough that a mistyped
// value does not refuse every login for a day.
const MaxResetGrace = time.Hour

// store compiles the store block b into c.cfg.Store, then what follows
// from it: the connections' networks, the rules' key budgets.
func (c *compiler) store(b *storeBlock) {
	sc := &c.cfg.Store
	switch b.Kind {
	case "memory":
		if b.URL != nil {
			c.Errorf(b.URLRange, "Unexpected url", "the memory store takes no url")
		}
		c.memoryStoreAttrs(b)
	case "redis":
		if b.URL == nil {
			c.Errorf(b.DefRange, "Missing url", "store \"redis\" needs url, such as \"redis://127.0.0.1:6379/0\", \"rediss://redis.internal:6380/0\", \"redis+cluster://10.0.0.1:7000,10.0.0.2:7000\" or \"redis+sentinel://mymaster@10.0.0.1:26379,10.0.0.2:26379\"")
		} else if err := ValidateStoreURL(*b.URL); err != nil {
			c.Errorf(b.URLRange, "Invalid url", "%v", err)
		}
		if b.MaxKeys != nil {
			c.Errorf(b.MaxKeysRange, "Unexpected max_keys", "max_keys bounds the memory store; Redis is bounded by its own maxmemory")
		}
		c.redisStoreAttrs(b, sc)
	default:
		c.Errorf(b.KindRange, "Unknown store", "%q is not a store; want \"memory\" or \"redis\"", b.Kind)
	}
	sc.Kind = b.Kind
	c.storeNetwork(b, sc) // network.go
	c.storeValues(b, sc)
	connsNetwork(&c.cfg.Conns, sc) // conns.go
	c.n.Keys = sc.StoreKeys
}

// storeValues compiles max_keys, url, timeout and fleet_size.
func (c *compiler) storeValues(b *storeBlock, sc *StoreConfig) {
	if b.MaxKeys != nil {
		sc.MaxKeys = *b.MaxKeys
		if sc.MaxKeys < 1 || sc.MaxKeys > rules.MaxKeysLimit {
			c.Errorf(b.MaxKeysRange, "Invalid max_keys", "max_keys must be between 1 and %d, got %d", rules.MaxKeysLimit, sc.MaxKeys)
			sc.MaxKeys = rules.DefaultMaxKeys
		}
	}
	if b.URL != nil {
		sc.URL = *b.URL
	}
	if b.Timeout != nil {
		d, err := rules.ParseDuration(*b.Timeout)
		if err != nil || d <= 0 {
			c.Errorf(b.TimeoutRange, "Invalid timeout", "%q is not a positive duration such as \"5ms\"", *b.Timeout)
		} else if d > time.Second {
			c.Errorf(b.TimeoutRange, "Timeout too long", "%q: a store call's budget sits on every request's path; keep it to a few milliseconds (at most 1s)", *b.Timeout)
		}
		sc.Timeout = d
	}
	if b.FleetSize != nil {
		sc.FleetSize = *b.FleetSize
		if sc.FleetSize < 1 {
			c.Errorf(b.FleetSizeRange, "Invalid fleet_size", "fleet_size must be at least 1, got %d", sc.FleetSize)
		}
	}
}

// maxDialTimeout bounds dial_timeout: establishing a connection happens
// at start and after an outage, off the steady request path, but a
// caller that must dial waits for it.
const maxDialTimeout = 30 * time.Second

// envName is a POSIX environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// storeAttr is an attribute of a store block: whether it is set, and
// where.
type storeAttr struct {
	set  bool
	name string
	rng  hcl.Range
}

// refuseAttrs refuses each of attrs that is set, "Unexpected NAME", with
// why (a format of the name) as the detail.
func (c *compiler) refuseAttrs(attrs []storeAttr, why string) {
	for _, a := range attrs {
		if a.set {
			c.Errorf(a.rng, "Unexpected "+a.name, why, a.name)
		}
	}
}

// memoryStoreAttrs refuses the Redis-only attributes on a memory store.
func (c *compiler) memoryStoreAttrs(b *storeBlock) {
	c.refuseAttrs([]storeAttr{
		{b.DialTimeout != nil, "dial_timeout", b.DialTimeoutRange},
		{b.CAFile != nil, "ca_file", b.CAFileRange},
		{b.CertFile != nil, "cert_file", b.CertFileRange},
		{b.KeyFile != nil, "key_file", b.KeyFileRange},
		{b.ServerName != nil, "server_name", b.ServerNameRange},
		{b.PasswordEnv != nil, "password_env", b.PasswordEnvRange},
		{b.SentinelUsername != nil, "sentinel_username", b.SentinelUsernameRange},
		{b.SentinelPasswordEnv != nil, "sentinel_password_env", b.SentinelPasswordEnvRange},
	}, "%s configures the connection to Redis; the memory store has none")
	c.refuseAttrs([]storeAttr{
		{b.ResetGrace != nil, "reset_grace", b.ResetGraceRange},
	}, "%s is for a Redis that comes back without its data; the memory store's counters live in the node (a restart reads its snapshot)")
}

// redisStoreAttrs compiles the Redis connection attributes into sc. Files
// are read and checked now (resolved against the policy file's
// directory), so that a missing CA or a key that does not match its
// certificate is a validate error, not a node that cannot reach Redis.
func (c *compiler) redisStoreAttrs(b *storeBlock, sc *StoreConfig) {
	c.redisDurations(b, sc)
	c.redisTLS(b, sc)
	c.redisCredentials(b, sc)
}

// storeURL is b's url, or "" when it has none.
func storeURL(b *storeBlock) string {
	if b.URL == nil {
		return ""
	}
	return *b.URL
}

// redisDurations compiles dial_timeout (at most maxDialTimeout) and
// reset_grace (at most MaxResetGrace).
func (c *compiler) redisDurations(b *storeBlock, sc *StoreConfig) {
	if b.DialTimeout != nil {
		d, err := rules.ParseDuration(*b.DialTimeout)
		switch {
		case err != nil || d <= 0:
			c.Errorf(b.DialTimeoutRange, "Invalid dial_timeout", "%q is not a positive duration such as \"1s\"", *b.DialTimeout)
		case d > maxDialTimeout:
			c.Errorf(b.DialTimeoutRange, "Invalid dial_timeout", "%q: at most %v", *b.DialTimeout, maxDialTimeout)
		default:
			sc.DialTimeout = d
		}
	}
	if b.ResetGrace != nil {
		d, err := rules.ParseDuration(*b.ResetGrace)
		switch {
		case err != nil || d < 0:
			c.Errorf(b.ResetGraceRange, "Invalid reset_grace", "%q is not a duration such as \"5m\" (\"0s\": none)", *b.ResetGrace)
		case d > MaxResetGrace:
			c.Errorf(b.ResetGraceRange, "Invalid reset_grace", "%q: at most %v (every sensitive rule that fails closed refuses meanwhile)", *b.ResetGrace, MaxResetGrace)
		default:
			sc.ResetGrace = d
		}
	}
}

// needTLS reports whether TLS attribute a is set, after refusing it when
// b's url names Redis without TLS.
func (c *compiler) needTLS(b *storeBlock, a storeAttr) bool {
	url := storeURL(b)
	useTLS := strings.HasPrefix(url, "rediss://") || strings.HasPrefix(url, "rediss+sentinel://")
	if a.set && !useTLS && url != "" {
		c.Errorf(a.rng, "Unexpected "+a.name, "%s configures TLS; the url %q is not rediss:// or rediss+sentinel://", a.name, RedactURL(url))
		return false
	}
	return a.set
}

// storeReadHint follows the detail of a store file's read error.
const storeReadHint = " (paths are relative to the policy file's directory)"

// redisTLS compiles server_name and ca_file, then the client certificate
// (redisClientCert).
func (c *compiler) redisTLS(b *storeBlock, sc *StoreConfig) {
	if c.needTLS(b, storeAttr{b.ServerName != nil, "server_name", b.ServerNameRange}) {
		sc.ServerName = c.serverName(*b.ServerName, b.ServerNameRange)
	}
	if c.needTLS(b, storeAttr{b.CAFile != nil, "ca_file", b.CAFileRange}) {
		sc.CAFile, _, _ = c.caFile(*b.CAFile, b.CAFileRange, storeReadHint)
	}
	c.redisClientCert(b, sc)
}

// redisClientCert compiles cert_file and key_file (clientCert), each a
// TLS attribute (needTLS).
func (c *compiler) redisClientCert(b *storeBlock, sc *StoreConfig) {
	a := clientCertAttrs{certRange: b.CertFileRange, keyRange: b.KeyFileRange,
		readHint: storeReadHint, refuser: "a Redis that checks client certificates"}
	if c.needTLS(b, storeAttr{b.CertFile != nil, "cert_file", b.CertFileRange}) {
		a.cert = b.CertFile
	}
	if c.needTLS(b, storeAttr{b.KeyFile != nil, "key_file", b.KeyFileRange}) {
		a.key = b.KeyFile
	}
	cc := c.clientCert(a)
	sc.CertFile, sc.KeyFile = cc.certFile, cc.keyFile
}

// redisCredentials compiles password_env and the sentinel credentials
// (sentinel_username, sentinel_password_env; only with a sentinel url):
// names of environment variables, which are read where the store is
// opened (cmd/edge), not here.
func (c *compiler) redisCredentials(b *storeBlock, sc *StoreConfig) {
	url := storeURL(b)
	env := func(p *string, name string, rng hcl.Range) string {
		if p == nil {
			return ""
		}
		if !envName.MatchString(*p) {
			// Not echoed: a secret pasted here must not reach the logs.
			c.Errorf(rng, "Invalid "+name, "not an environment variable name (letters, digits and '_', not starting with a digit; the value is not shown, in case it is a secret): %s names the variable that holds the secret", name)
		}
		return *p
	}
	sc.PasswordEnv = env(b.PasswordEnv, "password_env", b.PasswordEnvRange)
	if (b.SentinelUsername != nil || b.SentinelPasswordEnv != nil) && !strings.Contains(url, "+sentinel://") && url != "" {
		rng := b.SentinelUsernameRange
		if b.SentinelUsername == nil {
			rng = b.SentinelPasswordEnvRange
		}
		c.Errorf(rng, "Unexpected sentinel credentials", "sentinel_username and sentinel_password_env authenticate to sentinels; the url %q is not redis+sentinel:// or rediss+sentinel://", RedactURL(url))
	}
	if b.SentinelUsername != nil {
		sc.SentinelUsername = *b.SentinelUsername
	}
	sc.SentinelPasswordEnv = env(b.SentinelPasswordEnv, "sentinel_password_env", b.SentinelPasswordEnvRange)
}
