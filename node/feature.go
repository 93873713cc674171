package node

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// Defaults of the node's configuration (docs/policy.md, "edge { }" and
// "store").
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultAdminListen  = "127.0.0.1:9901"
	DefaultUpstream     = "http://127.0.0.1:9000"
	DefaultMaxBodyBytes = 65536
	DefaultKeySecretEnv = "EDGE_KEY_SECRET"
	DefaultStoreTimeout = 5 * time.Millisecond
)

// Feature returns the node's feature: the edge { } and store { } blocks,
// decoded before every other block (rules.BlockType.First), edge before
// store. What the rules read of them goes to the policy
// (rules.Compiler.SetNode); the rest is the policy's Config (Of). Once
// every rule is compiled (rules.Feature.PolicyDone), it checks them
// against decide_listen (ReadsBody).
func Feature() rules.Feature {
	return rules.Feature{
		Name: "node",
		Blocks: []rules.BlockType{
			// Multiple: a second block is refused here, as rules refused it,
			// once the first one decoded (decodeEdge, decodeStore).
			{Type: "edge", First: true, Multiple: true, Decode: decodeEdge},
			{Type: "store", Labels: []string{"kind"}, First: true, Multiple: true, Decode: decodeStore},
		},
		PolicyDone: decideRules, // the rules against decide_listen (decide.go)
	}
}

// Config is the node's own configuration: the edge { } and store { }
// blocks compiled, but for what the rules read of them (rules.Node, which
// the Policy embeds: the client address, the prefixes, path_case,
// dry_run, upstream_timeout, decide_listen and the store's key budgets).
type Config struct {
	// Listen, AdminListen and Upstream are the public listener, the admin
	// listener and the origin (defaults DefaultListen, DefaultAdminListen,
	// DefaultUpstream).
	Listen      string
	AdminListen string
	Upstream    string
	// MaxBodyBytes caps request bodies, in bytes (default 65536).
	MaxBodyBytes int
	// KeySecretEnv names the environment variable of the key secret
	// (default DefaultKeySecretEnv).
	KeySecretEnv string
	// TLS, when set, serves the public listener over TLS (tls.go).
	TLS *ListenerTLS
	// JA4Header is the canonical name of the header a trusted proxy sets
	// to the connection's JA4 fingerprint; empty: none (ja4.go).
	JA4Header string
	// UpstreamTLS configures TLS to an https:// upstream; nil for http://
	// (upstream.go).
	UpstreamTLS *UpstreamTLS
	// Conns is the public listener's connection budgets and read
	// deadlines (conns.go).
	Conns Conns
	// Store is the counter store the policy asks for (store.go).
	Store StoreConfig
	// LoadShedding is the edge block's load_shedding { } as written, nil
	// without one: behaviour/shed compiles it (shed.Of).
	LoadShedding *LoadSheddingBlock

	// edgeAt and storeAt are where the first edge and store blocks are
	// (nil: none yet), for a second one's diagnostic.
	edgeAt, storeAt *hcl.Range
}

// Of returns p's node configuration: its edge { } and store { } blocks
// as compiled, or the defaults for a policy without them (or loaded
// without Feature). It allocates nothing (a type assertion: the policy
// keeps it in rules.Node.Config), and it is shared: the caller must not
// modify it.
func Of(p *rules.Policy) *Config {
	if c, _ := p.Node.Config.(*Config); c != nil {
		return c
	}
	return &defaults
}

// defaults is the Config of a policy without the node's blocks (Of).
var defaults = defaultConfig()

// defaultConfig is the Config of an empty policy.
func defaultConfig() Config {
	return Config{
		Listen:       DefaultListen,
		AdminListen:  DefaultAdminListen,
		Upstream:     DefaultUpstream,
		MaxBodyBytes: DefaultMaxBodyBytes,
		KeySecretEnv: DefaultKeySecretEnv,
		Conns:        defaultConns,
		Store: StoreConfig{Kind: "memory", StoreKeys: rules.DefaultNode().Keys,
			Timeout: DefaultStoreTimeout, FleetSize: 1},
	}
}

// compiler compiles the node's blocks of one policy: rules' Compiler for
// the diagnostics, the Config being built, and n, what the rules will read
// (handed over with SetNode once the block is compiled).
type compiler struct {
	*rules.Compiler
	cfg *Config
	n   rules.Node
}

// decodeEdge compiles the edge block. A second one is an error, as any
// duplicate block is, once it decoded.
func decodeEdge(rc *rules.Compiler, b *hcl.Block) any {
	var e edgeBlock
	if !rc.Decode(b, &e) {
		return nil
	}
	e.DefRange = b.DefRange
	cfg, _ := rc.Policy().Node.Config.(*Config)
	if cfg != nil && cfg.edgeAt != nil {
		rc.Errorf(b.DefRange, "Duplicate edge block", "only one edge block is allowed; the first is at %s", *cfg.edgeAt)
		return nil
	}
	d := defaultConfig() // edge { } is decoded before store { }
	d.edgeAt = &e.DefRange
	c := &compiler{Compiler: rc, cfg: &d, n: rc.Policy().Node}
	c.edge(&e)
	c.n.Config = c.cfg
	rc.SetNode(c.n)
	return nil // the policy keeps it in rules.Node.Config (Of)
}

// decodeStore compiles the store block into the policy's Config (the
// edge block's, or the defaults without one). A second store block is an
// error once it decoded, and is not compiled.
func decodeStore(rc *rules.Compiler, b *hcl.Block) any {
	var s storeBlock
	if !rc.Decode(b, &s) || len(b.Labels) != 1 {
		return nil
	}
	s.Kind, s.KindRange, s.DefRange = b.Labels[0], b.LabelRanges[0], b.DefRange
	cfg, _ := rc.Policy().Node.Config.(*Config)
	if cfg != nil && cfg.storeAt != nil {
		rc.Errorf(s.DefRange, "Duplicate store", "only one store block is allowed; the first is at %s", *cfg.storeAt)
		return nil
	}
	if cfg == nil {
		d := defaultConfig()
		cfg = &d
	}
	cfg.storeAt = &s.DefRange
	c := &compiler{Compiler: rc, cfg: cfg, n: rc.Policy().Node}
	c.store(&s)
	c.n.Config = c.cfg
	rc.SetNode(c.n)
	return nil
}
