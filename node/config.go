package node

import "github.com/hashicorp/hcl/v2"

// The types in this file are the HCL schema of the node's blocks (edge,
// store), decoded with gohcl (rules.Compiler.Decode); docs/policy.md is the
// language. Pointers mark optional attributes whose absence matters (a
// default applies). Each *Range field records where an attribute's value
// sits, so compile diagnostics point at it.

// edgeBlock is `edge { }`: the node's listeners, upstream and client-address
// settings.
type edgeBlock struct {
	// listen is the public listener, "HOST:PORT".
	Listen *string `hcl:"listen,optional"`
	// admin_listen is the admin listener (default "127.0.0.1:9901").
	AdminListen *string `hcl:"admin_listen,optional"`
	// upstream is the origin, "http://HOST:PORT" or "https://HOST:PORT".
	Upstream *string `hcl:"upstream,optional"`
	// upstream_timeout is the origin's budget for one request (default
	// "10s"; upstream.go).
	UpstreamTimeout *string `hcl:"upstream_timeout,optional"`
	// trusted_proxies are CIDRs allowed to say who the client is.
	TrustedProxies hcl.Expression `hcl:"trusted_proxies,optional"`
	// forwarded_header is "x-forwarded-for" (default) or "forwarded".
	ForwardedHeader *string `hcl:"forwarded_header,optional"`
	// ipv4_prefix groups IPv4 clients (default 32).
	IPv4Prefix *int `hcl:"ipv4_prefix,optional"`
	// ipv6_prefix groups IPv6 clients (default 64).
	IPv6Prefix *int `hcl:"ipv6_prefix,optional"`
	// nat64_prefixes are local NAT64 prefixes (RFC 6052 §2.2, each /32,
	// /40, /48, /56, /64 or /96) whose addresses count as the IPv4 address
	// they embed; 6to4, Teredo, 64:ff9b::/96 and IPv4-compatible addresses
	// always do (docs/client-address.md).
	NAT64Prefixes hcl.Expression `hcl:"nat64_prefixes,optional"`
	// max_body_bytes caps request bodies (default 65536).
	MaxBodyBytes *int `hcl:"max_body_bytes,optional"`
	// path_case is "insensitive" (default) or "sensitive".
	PathCase *string `hcl:"path_case,optional"`
	// dry_run puts every rule in dry-run.
	DryRun *bool `hcl:"dry_run,optional"`
	// key_secret_env names the environment variable holding the key secret
	// (default "EDGE_KEY_SECRET").
	KeySecretEnv *string `hcl:"key_secret_env,optional"`
	// tls serves the public listener over TLS (tls.go).
	TLS *tlsBlock `hcl:"tls,block"`
	// ja4_header names the header in which a trusted proxy that terminates
	// TLS forwards the connection's JA4 fingerprint (ja4.go).
	JA4Header *string `hcl:"ja4_header,optional"`
	// upstream_tls configures TLS to an https:// upstream
	// (upstream.go).
	UpstreamTLS *upstreamTLSBlock `hcl:"upstream_tls,block"`
	// decide_listen is the decision-only listener, for NGINX auth_request
	// and Envoy ext_authz (decide.go).
	DecideListen *string `hcl:"decide_listen,optional"`
	// load_shedding sheds requests by priority when the origin is
	// saturated (behaviour/shed compiles it: Config.LoadShedding).
	LoadShedding *LoadSheddingBlock `hcl:"load_shedding,block"`
	// max_conns, max_conns_per_ip, max_conns_per_ipv6_prefix and
	// max_conns_per_network cap the public listener's open connections,
	// the node's, one client's and one client network's;
	// header_timeout and body_timeout bound the reading of a request
	// (conns.go).
	MaxConns              *int    `hcl:"max_conns,optional"`
	MaxConnsPerIP         *int    `hcl:"max_conns_per_ip,optional"`
	MaxConnsPerIPv6Prefix *int    `hcl:"max_conns_per_ipv6_prefix,optional"`
	MaxConnsPerNetwork    *int    `hcl:"max_conns_per_network,optional"`
	HeaderTimeout         *string `hcl:"header_timeout,optional"`
	BodyTimeout           *string `hcl:"body_timeout,optional"`

	DefRange             hcl.Range `hcl:",def_range"`
	ListenRange          hcl.Range `hcl:"listen,attr_value_range"`
	AdminListenRange     hcl.Range `hcl:"admin_listen,attr_value_range"`
	UpstreamRange        hcl.Range `hcl:"upstream,attr_value_range"`
	UpstreamTimeoutRange hcl.Range `hcl:"upstream_timeout,attr_value_range"`
	ForwardedHeaderRange hcl.Range `hcl:"forwarded_header,attr_value_range"`
	IPv4PrefixRange      hcl.Range `hcl:"ipv4_prefix,attr_value_range"`
	IPv6PrefixRange      hcl.Range `hcl:"ipv6_prefix,attr_value_range"`
	MaxBodyBytesRange    hcl.Range `hcl:"max_body_bytes,attr_value_range"`
	PathCaseRange        hcl.Range `hcl:"path_case,attr_value_range"`
	KeySecretEnvRange    hcl.Range `hcl:"key_secret_env,attr_value_range"`
	JA4HeaderRange       hcl.Range `hcl:"ja4_header,attr_value_range"`
	DecideListenRange    hcl.Range `hcl:"decide_listen,attr_value_range"`

	MaxConnsRange              hcl.Range `hcl:"max_conns,attr_value_range"`
	MaxConnsPerIPRange         hcl.Range `hcl:"max_conns_per_ip,attr_value_range"`
	MaxConnsPerIPv6PrefixRange hcl.Range `hcl:"max_conns_per_ipv6_prefix,attr_value_range"`
	MaxConnsPerNetworkRange    hcl.Range `hcl:"max_conns_per_network,attr_value_range"`
	HeaderTimeoutRange         hcl.Range `hcl:"header_timeout,attr_value_range"`
	BodyTimeoutRange           hcl.Range `hcl:"body_timeout,attr_value_range"`
}

// storeBlock is `store "memory" { }` or `store "redis" { }`.
type storeBlock struct {
	Kind string `hcl:"kind,label"`
	// max_keys bounds the memory store's keys of the rules that set no
	// max_keys of their own, split evenly among them (default 100000).
	MaxKeys *int `hcl:"max_keys,optional"`
	// url is the Redis address (redis://host:port/db, rediss://…,
	// redis+cluster://h:p,h:p, redis+sentinel://master@h:p,h:p).
	URL *string `hcl:"url,optional"`
	// timeout is the per-call budget (default "5ms").
	Timeout *string `hcl:"timeout,optional"`
	// fleet_size divides limits for the "local" fallback bucket.
	FleetSize *int `hcl:"fleet_size,optional"`
	// network_share is the most of a sensitive rule's key budget one
	// client network may hold ("5%" by default, "100%": no bound; an
	// ordinary rule is held to a share only by its own network_share);
	// network_ipv4_prefix and
	// network_ipv6_prefix are what a network is (24 and 48 by default).
	// Memory store only (rules/network.go; network.go here).
	NetworkShare      *string `hcl:"network_share,optional"`
	NetworkIPv4Prefix *int    `hcl:"network_ipv4_prefix,optional"`
	NetworkIPv6Prefix *int    `hcl:"network_ipv6_prefix,optional"`
	// dial_timeout bounds establishing one connection to Redis: TCP, TLS
	// handshake, sentinel lookup (default "1s").
	DialTimeout *string `hcl:"dial_timeout,optional"`
	// ca_file, cert_file, key_file and server_name configure a rediss://
	// or rediss+sentinel:// url: the CA bundle (default: the system's
	// pool), the client certificate and key (PEM; paths relative to the
	// policy file), the name the server's certificate must carry.
	CAFile     *string `hcl:"ca_file,optional"`
	CertFile   *string `hcl:"cert_file,optional"`
	KeyFile    *string `hcl:"key_file,optional"`
	ServerName *string `hcl:"server_name,optional"`
	// password_env names the environment variable holding the Redis
	// password (it replaces the url's), so the secret is not in the file.
	PasswordEnv *string `hcl:"password_env,optional"`
	// sentinel_username and sentinel_password_env authenticate to the
	// sentinels of a redis+sentinel url, when they require it.
	SentinelUsername    *string `hcl:"sentinel_username,optional"`
	SentinelPasswordEnv *string `hcl:"sentinel_password_env,optional"`
	// reset_grace is how long after the node finds Redis came back
	// without its data the sensitive rules answer by their
	// on_store_error (default "0s": none; docs/deploying.md).
	ResetGrace *string `hcl:"reset_grace,optional"`

	DefRange                 hcl.Range `hcl:",def_range"`
	KindRange                hcl.Range `hcl:"kind,label_range"`
	MaxKeysRange             hcl.Range `hcl:"max_keys,attr_value_range"`
	NetworkShareRange        hcl.Range `hcl:"network_share,attr_value_range"`
	NetworkIPv4PrefixRange   hcl.Range `hcl:"network_ipv4_prefix,attr_value_range"`
	NetworkIPv6PrefixRange   hcl.Range `hcl:"network_ipv6_prefix,attr_value_range"`
	URLRange                 hcl.Range `hcl:"url,attr_value_range"`
	TimeoutRange             hcl.Range `hcl:"timeout,attr_value_range"`
	FleetSizeRange           hcl.Range `hcl:"fleet_size,attr_value_range"`
	DialTimeoutRange         hcl.Range `hcl:"dial_timeout,attr_value_range"`
	ResetGraceRange          hcl.Range `hcl:"reset_grace,attr_value_range"`
	CAFileRange              hcl.Range `hcl:"ca_file,attr_value_range"`
	CertFileRange            hcl.Range `hcl:"cert_file,attr_value_range"`
	KeyFileRange             hcl.Range `hcl:"key_file,attr_value_range"`
	ServerNameRange          hcl.Range `hcl:"server_name,attr_value_range"`
	PasswordEnvRange         hcl.Range `hcl:"password_env,attr_value_range"`
	SentinelUsernameRange    hcl.Range `hcl:"sentinel_username,attr_value_range"`
	SentinelPasswordEnvRange hcl.Range `hcl:"sentinel_password_env,attr_value_range"`
}

// LoadSheddingBlock is `edge { load_shedding { } }`, decoded with the edge
// block and kept as written (Config.LoadShedding): behaviour/shed compiles
// it, with the rules' priorities.
type LoadSheddingBlock struct {
	// max_in_flight is the node's ceiling on the requests it has at the
	// origin; optional (without it only adaptive rules shed).
	MaxInFlight *int64 `hcl:"max_in_flight,optional"`
	// shed_at is each priority's share of a capacity, an object of
	// percentages: { low = "50%", normal = "75%", high = "90%" }.
	ShedAt hcl.Expression `hcl:"shed_at,optional"`
	// retry_after is the Retry-After of a shed request on an ordinary
	// route (default "1s").
	RetryAfter *string `hcl:"retry_after,optional"`
	// retry_after_jitter spreads it, as a rule's retry_after_jitter does.
	RetryAfterJitter *string `hcl:"retry_after_jitter,optional"`

	DefRange              hcl.Range `hcl:",def_range"`
	MaxInFlightRange      hcl.Range `hcl:"max_in_flight,attr_value_range"`
	RetryAfterRange       hcl.Range `hcl:"retry_after,attr_value_range"`
	RetryAfterJitterRange hcl.Range `hcl:"retry_after_jitter,attr_value_range"`
}
