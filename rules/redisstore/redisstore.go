package redisstore

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/edge-gateway/edge/rules"
)

const (
	// DefaultURL is the server when Options.URL is empty.
	DefaultURL = "redis://127.0.0.1:6379/0"
	// DefaultTimeout is Options.Timeout when 0.
	DefaultTimeout = 5 * time.Millisecond
	// DefaultDialTimeout is Options.DialTimeout when 0: enough for a TCP
	// connect, a TLS handshake and, with Sentinel, asking a sentinel for
	// the master, to a managed Redis in another zone or region.
	DefaultDialTimeout = time.Second
	// DefaultPrefix is Options.Prefix when empty.
	DefaultPrefix = "edge:"
	// CallerClockSlack is added to every Redis TTL when Options.UseCallerClock
	// is set: keys then expire in Redis' time, not in the caller's.
	CallerClockSlack = time.Minute

	// maxClockUS bounds a caller's clock: the algorithms are exact in Lua
	// for clocks under 2^52µs since the epoch (counter.MaxExact).
	maxClockUS = 1 << 52
)

//go:embed take.lua
var takeScript string

// takeSHA is takeScript's SHA1, the name EVALSHA calls it by.
var takeSHA = func() string {
	sum := sha1.Sum([]byte(takeScript))
	return hex.EncodeToString(sum[:])
}()

// Options configure a Store. The zero value works: a local Redis on the
// default port, a 5ms budget, keys under "edge:".
type Options struct {
	// URL selects the server. A single Redis:
	// "redis://[user:password@]host:port/db", "rediss://…" (TLS) or
	// "unix:///path/redis.sock?db=N". A Redis Cluster:
	// "redis+cluster://[user:password@]host:port,host:port,…", any of its
	// nodes (the others are discovered). A master that Redis Sentinel
	// manages: "redis+sentinel://[user:password@]MASTER@host:port,…[/db]"
	// listing sentinels, or "rediss+sentinel://…" over TLS (sentinel.go).
	// Empty: DefaultURL. Timeouts, retries and the protocol in the URL's
	// query are overridden.
	URL string
	// TLS configures the connections of a rediss:// or rediss+sentinel://
	// URL (tls.go); it is an error with any other.
	TLS TLS
	// Password, when not empty, replaces the URL's password (an ACL
	// user's, or requirepass), so that the secret can come from the
	// environment instead of a file (the policy's password_env).
	Password string
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// of a sentinel URL, when they require it (their own requirepass or
	// ACL); the URL's credentials are the master's.
	SentinelUsername, SentinelPassword string
	// DialTimeout bounds establishing one connection: the TCP connect, the
	// TLS handshake and, with Sentinel, the question to a sentinel
	// (DefaultDialTimeout when 0). It is longer than Timeout because a
	// handshake is several round trips and some CPU; a call does not pay
	// it in the steady state: Ping, which the node calls at start and its
	// breaker's probes call after an outage, opens the connections the
	// coalescing flushers use, and idle connections are kept (TCP
	// keep-alive finds dead ones). A coalesced call still fails after its
	// budget while a flusher dials; an uncoalesced one (DisableCoalescing,
	// a cluster) that finds no idle connection waits for the dial.
	DialTimeout time.Duration
	// Timeout is the budget of one round trip (DefaultTimeout when 0):
	// the client's pool-wait timeout, an uncoalesced call's write and read
	// timeouts (a new connection's dial has DialTimeout), and a coalesced
	// call's own timer from the moment it is queued, so a call to a server
	// that does not answer fails after about Timeout (up to 4 Timeouts
	// when the server has just stopped answering), while a coalesced call
	// whose server answers late waits for its reply up to 20 Timeouts,
	// the flushers' read and write timeout (the package doc's "Failures
	// and the time budget"); nothing is ever retried (a retried script
	// call that did run would charge twice).
	Timeout time.Duration
	// PoolSize is the number of connections per server (go-redis' default
	// when 0: 10 per CPU for a single Redis, 5 per CPU per cluster node).
	PoolSize int
	// Prefix starts every key (DefaultPrefix when empty), so that one Redis
	// can serve several fleets. It must not contain '{' or '}', which would
	// change the keys' hash slots.
	Prefix string
	// UseCallerClock is for tests only: the script decides at the now
	// passed to Take instead of the Redis server's TIME, so that the
	// conformance tables run against a real Redis without sleeping. Every
	// key then lives CallerClockSlack longer in Redis than its state does,
	// since Redis expires keys on its own clock. A fleet must never set it:
	// its nodes would stop sharing one clock.
	UseCallerClock bool
	// DisableCoalescing sends each Take's script call on a connection of
	// its own, one round trip per call, instead of batching the calls of
	// concurrent Takes into pipelines (the package doc's "Coalescing").
	// Each Take is one script call either way.
	DisableCoalescing bool

	// flushers, when not 0, is the number of coalescing flushers (tests
	// and benchmarks).
	flushers int
}

// Stats counts the events of a Store's life that dashboards should see.
type Stats struct {
	// NoScript counts script calls answered NOSCRIPT (the script cache was
	// flushed, or the server restarted or failed over) and run again with
	// EVAL: the script had not run, so nothing was counted twice.
	NoScript uint64
	// CrossSlot counts Take calls whose keys spanned several hash slots of
	// a Redis Cluster.
	CrossSlot uint64
	// Undos counts cross-slot calls refused in one slot whose takes in the
	// other slots were undone (one more round trip each).
	Undos uint64
	// UndoErrors counts undo round trips that failed: their units stay
	// taken until the keys decay (the package doc's error bound).
	UndoErrors uint64
	// Pipelines counts the pipelines coalescing wrote (each carrying the
	// script calls of one or more Takes).
	Pipelines uint64
	// SharedCalls counts the Takes whose script call went together with
	// others' in one script call (the package doc's "Coalescing").
	SharedCalls uint64
	// LateReads counts reads whose deadline fired while the server's
	// reply was already in the socket (a node too busy to look in time),
	// which were read rather than failed (the package doc's "Store time").
	LateReads uint64
	// LateReplies counts coalesced calls decided by a reply that came
	// after their budget: the store answered late and the call waited for
	// it (the package doc's "Failures and the time budget").
	LateReplies uint64
	// EpochResets counts the resets CheckEpoch found: Redis came back
	// without its data (epoch.go).
	EpochResets uint64
}

// ErrMalformedReply is Take's error when the script's reply does not have
// the shape it must (a wrong type, length or range anywhere): the store
// cannot decide, and the caller applies each rule's on_store_error.
var ErrMalformedReply = errors.New("redisstore: malformed script reply")

var (
	errClock = errors.New("redisstore: caller clock outside 0…2^52µs since the epoch")
)

// scripter is the slice of go-redis a script call needs (redis_rate's
// rediser idea): running a prepared command. *redis.Client implements it;
// tests fake it to return malformed replies.
type scripter interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// pipeliner is implemented by *redis.Client: several script calls to one
// server in one round trip.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// Store is the Redis rules.Store. Create one with New.
type Store struct {
	prefix      string
	slackMS     int64
	callerClock bool

	// A single Redis: node, and co when coalescing. A cluster: masterFor
	// routes a key to its master's client (cluster is only for Ping,
	// ScriptLoad and Close).
	node      scripter
	co        *coalescer
	warm      int // pipelines Ping runs at once: the flushers' connections
	cluster   *redis.ClusterClient
	masterFor func(ctx context.Context, key string) (scripter, error)
	closeFn   func() error

	// waiters pools the calls (and their handoffs) of single-slot Takes.
	waiters sync.Pool

	closeOnce sync.Once
	closeErr  error

	// beforeUndo, when set (tests only), runs between a cross-slot call's
	// take and its undo.
	beforeUndo func()

	// sentinel is true for a master that Redis Sentinel manages
	// (MinReplicasToWrite).
	sentinel bool

	noScript, crossSlot, undos, undoErrors atomic.Uint64
	late                                   lateReads

	// replies counts the server's answers (Replies).
	replies atomic.Uint64

	// epoch is CheckEpoch's state (epoch.go).
	epoch epochState
}

var _ rules.Store = (*Store)(nil)

// New returns a Store for opts. It does no I/O: a server that is down at
// start is a store error on each Take (the caller's on_store_error), not a
// node that cannot start. Call Ping to check the server and load the script
// into its cache before the first request; a Take that finds the script
// missing runs it by EVAL instead (Stats.NoScript).
func New(opts Options) (*Store, error) {
	if opts.URL == "" {
		opts.URL = DefaultURL
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = max(DefaultDialTimeout, opts.Timeout)
	}
	switch {
	case opts.Timeout < 0:
		return nil, fmt.Errorf("redisstore: timeout %v is negative", opts.Timeout)
	case opts.DialTimeout < 0:
		return nil, fmt.Errorf("redisstore: dial timeout %v is negative", opts.DialTimeout)
	case opts.PoolSize < 0:
		return nil, fmt.Errorf("redisstore: pool size %d is negative", opts.PoolSize)
	case strings.ContainsAny(opts.Prefix, "{}"):
		return nil, fmt.Errorf("redisstore: prefix %q contains '{' or '}', which would pick the keys' hash slot", opts.Prefix)
	}
	s := &Store{prefix: opts.Prefix, callerClock: opts.UseCallerClock}
	s.epoch.wake = make(chan struct{}, 1)
	if opts.UseCallerClock {
		s.slackMS = CallerClockSlack.Milliseconds()
	}
	if rest, ok := strings.CutPrefix(opts.URL, "redis+cluster://"); ok {
		co, err := parseClusterURL(rest)
		if err != nil {
			return nil, err
		}
		configureCluster(co, opts, &s.late)
		cc := redis.NewClusterClient(co)
		s.cluster = cc
		s.masterFor = func(ctx context.Context, key string) (scripter, error) {
			c, err := cc.MasterForKey(ctx, key)
			if err != nil {
				return nil, err
			}
			return c, nil
		}
		s.closeFn = cc.Close
		return s, nil
	}
	var c *redis.Client
	if rest, tlsOn := strings.CutPrefix(opts.URL, sentinelTLSScheme); tlsOn || strings.HasPrefix(opts.URL, sentinelScheme) {
		if !tlsOn {
			rest = opts.URL[len(sentinelScheme):]
		}
		fc, err := newFailover(rest, opts, tlsOn, &s.late)
		if err != nil {
			return nil, err
		}
		c = fc
		s.sentinel = true
	} else {
		o, err := redis.ParseURL(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: parsing URL: %w", redactErr(err))
		}
		// ParseURL made rediss:// a tls.Config verifying the host; ours
		// adds the CA, the client certificate and a server name.
		if o.TLSConfig, err = tlsConfig(opts, o.TLSConfig != nil); err != nil {
			return nil, err
		}
		if opts.Password != "" {
			o.Password = opts.Password
		}
		configure(o, opts, &s.late)
		c = redis.NewClient(o)
	}
	s.node, s.closeFn = c, c.Close
	if !opts.DisableCoalescing {
		flushers, spares := opts.flushers, 0
		if flushers == 0 {
			flushers, spares = defaultFlushers, spareFlushers
		}
		s.co = newCoalescer(s, c, opts.Timeout, flushers, spares)
		s.warm = flushers
	}
	return s, nil
}

// configure sets what every connection of a single Redis needs.
func configure(o *redis.Options, opts Options, late *lateReads) {
	o.MaxRetries = -1 // a retried EVALSHA that ran charges twice
	o.DialTimeout = opts.DialTimeout
	o.Dialer = storeTimeDialer(opts.DialTimeout, opts.Timeout, o.TLSConfig, late) // the package doc's "Store time"
	o.ConnMaxIdleTime = -1                                                        // keep idle connections: a call must not pay a handshake
	o.DialerRetries = 1                                                           // one dial per attempt: retries would outlast the budget
	o.PoolTimeout = opts.Timeout
	o.ReadTimeout, o.WriteTimeout = ioTimeout(opts), ioTimeout(opts)
	o.ContextTimeoutEnabled = true // a caller's deadline or cancel ends the call early
	o.Protocol = 2                 // no HELLO, no push notifications: one command per connection setup at most
	o.DisableIdentity = true       // no CLIENT SETINFO on connect
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if opts.PoolSize > 0 {
		o.PoolSize = opts.PoolSize
	}
}

// ioTimeout is the client's read and write timeout: the budget for a call
// on a connection of its own, which fails when the server has not answered
// in time; overloadBudgets budgets for the coalescing flushers' pipelines,
// so that a reply the server sends late (a node short of CPU) is read and
// decides its calls, while each call's own timer fails it after its budget
// when the server is silent (coalesce.go's wait).
func ioTimeout(opts Options) time.Duration {
	if opts.DisableCoalescing {
		return opts.Timeout
	}
	return overloadBudgets * opts.Timeout
}

// configureCluster is configure for a cluster's node clients: the fields
// configure sets on a redis.Options, copied (go-redis' options types share
// them by name, not by a type), so that the values and their reasons stand
// once. MaxRedirects is -1 too: go-redis' cluster client retries a command
// after a timeout within its redirect budget. Script calls do not go
// through that path anyway (Take routes them to the masters' clients
// itself).
func configureCluster(co *redis.ClusterOptions, opts Options, late *lateReads) {
	opts.DisableCoalescing = true // a cluster's calls go one per connection
	o := &redis.Options{TLSConfig: co.TLSConfig}
	configure(o, opts, late)
	co.MaxRetries, co.MaxRedirects, co.DialerRetries = o.MaxRetries, -1, o.DialerRetries
	co.DialTimeout, co.Dialer, co.ConnMaxIdleTime = o.DialTimeout, o.Dialer, o.ConnMaxIdleTime
	co.PoolTimeout, co.ReadTimeout, co.WriteTimeout = o.PoolTimeout, o.ReadTimeout, o.WriteTimeout
	co.ContextTimeoutEnabled, co.Protocol, co.DisableIdentity = o.ContextTimeoutEnabled, o.Protocol, o.DisableIdentity
	co.MaintNotificationsConfig, co.PoolSize = o.MaintNotificationsConfig, o.PoolSize
}

// redactErr is a URL parsing error without the URL, which may hold a
// password (url.Error quotes it whole).
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("malformed URL: %w", ue.Err)
	}
	return err
}

// parseClusterURL parses what follows "redis+cluster://":
// "[user:password@]host:port,host:port[/]" (database 0 only: a cluster
// has no other).
func parseClusterURL(rest string) (*redis.ClusterOptions, error) {
	o := &redis.ClusterOptions{}
	if strings.ContainsAny(rest, "?#") {
		return nil, errors.New("redisstore: a redis+cluster URL takes no query or fragment")
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		u, err := url.Parse("redis://" + rest[:i+1] + "host")
		if err != nil {
			return nil, fmt.Errorf("redisstore: parsing cluster URL credentials: %w", err)
		}
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
		rest = rest[i+1:]
	}
	rest = strings.TrimSuffix(strings.TrimSuffix(rest, "/0"), "/")
	if rest == "" {
		return nil, errors.New("redisstore: a redis+cluster URL needs at least one host:port")
	}
	var err error
	if o.Addrs, err = parseAddrs(rest, "cluster node"); err != nil {
		return nil, err
	}
	return o, nil
}

// parseAddrs splits list, "HOST:PORT[,HOST:PORT…]", into its addresses;
// what names one in an error ("cluster node", "sentinel").
func parseAddrs(list, what string) ([]string, error) {
	var addrs []string
	for addr := range strings.SplitSeq(list, ",") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("redisstore: %s %q: %w", what, addr, err)
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 || host == "" {
			return nil, fmt.Errorf("redisstore: %s %q: want host:port", what, addr)
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// Ping checks that the server (every master of a cluster) answers and
// loads the script into its cache, for readiness probes and start-up. On
// a single Redis (or Sentinel's master) that coalesces, it also opens, by
// as many concurrent one-PING pipelines, the connections the flushers
// use, so that requests after it pay no dial or TLS handshake: go-redis
// keeps pipeline connections apart from the others and never pre-dials
// them. ctx bounds it all; a connection it needs is dialed within
// Options.DialTimeout, not the call budget.
func (s *Store) Ping(ctx context.Context) error {
	if s.cluster != nil {
		err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
		if err != nil {
			return fmt.Errorf("redisstore: pinging the cluster: %w", err)
		}
		s.replies.Add(1)
		return loaded(s.cluster.ScriptLoad(ctx, takeScript))
	}
	c, ok := s.node.(*redis.Client)
	if !ok {
		return nil
	}
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: pinging: %w", err)
	}
	s.replies.Add(1)
	if err := loaded(c.ScriptLoad(ctx, takeScript)); err != nil {
		return err
	}
	return s.warmPipelines(ctx, c)
}

// warmPipelines runs s.warm one-PING pipelines at once, so that the
// pipeline pool holds a connection for each flusher.
func (s *Store) warmPipelines(ctx context.Context, c *redis.Client) error {
	if s.warm == 0 {
		return nil
	}
	errs := make([]error, s.warm)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			pipe := c.Pipeline()
			pipe.Ping(ctx)
			_, errs[i] = pipe.Exec(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redisstore: opening the pipelines' connections: %w", err)
	}
	return nil
}

// loaded checks a SCRIPT LOAD's answer.
func loaded(cmd *redis.StringCmd) error {
	sha, err := cmd.Result()
	if err != nil {
		return fmt.Errorf("redisstore: loading the take script: %w", err)
	}
	if sha != takeSHA {
		return fmt.Errorf("redisstore: loading the take script: server named it %s, want %s", sha, takeSHA)
	}
	return nil
}

// Replies returns the number of answers the server has sent since New:
// script results and pings' PONGs, not error replies nor failures. On a
// single Redis that coalesces it counts the replies the flushers read,
// those read after their call's budget had passed included (the call had
// already failed); uncoalesced and on a cluster, each Take that the
// servers answered counts one. It makes the Store a failclosed.Liveness,
// whose breaker then opens on the store's silence rather than on calls
// failing while it answers. An atomic load; safe for concurrent use.
func (s *Store) Replies() uint64 { return s.replies.Load() }

// Stats returns the Store's counters since New.
func (s *Store) Stats() Stats {
	return Stats{
		NoScript:    s.noScript.Load(),
		CrossSlot:   s.crossSlot.Load(),
		Undos:       s.undos.Load(),
		UndoErrors:  s.undoErrors.Load(),
		Pipelines:   s.pipelines(),
		SharedCalls: s.sharedCalls(),
		LateReads:   s.late.Load(),
		LateReplies: s.lateReplies(),
		EpochResets: s.epoch.resets.Load(),
	}
}

func (s *Store) lateReplies() uint64 {
	if s.co == nil {
		return 0
	}
	return s.co.late.Load()
}

func (s *Store) sharedCalls() uint64 {
	if s.co == nil {
		return 0
	}
	return s.co.shared.Load()
}

func (s *Store) pipelines() uint64 {
	if s.co == nil {
		return 0
	}
	return s.co.flushes.Load()
}

// Close stops coalescing (a Take queued then fails) and closes the
// client's connections. It may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.co != nil {
			s.co.close()
		}
		if s.closeFn != nil {
			s.closeErr = s.closeFn()
		}
		if s.co != nil {
			s.co.waitFlushers()
		}
	})
	return s.closeErr
}

// getWaiter returns a pooled call and handoff.
func (s *Store) getWaiter() *waiter {
	if w, ok := s.waiters.Get().(*waiter); ok {
		return w
	}
	return newWaiter()
}

// putWaiter pools w, dropping what it refers to.
func (s *Store) putWaiter(w *waiter) {
	w.idx, w.node, w.reply, w.err, w.pay = nil, nil, nil, nil, nil
	s.waiters.Put(w)
}

// Take applies ops as rules.Store specifies, in one script call on a single
// Redis (one round trip), or one per hash slot on a cluster (package doc).
// With the server's clock (the default) now is not used: the script reads
// TIME. It returns an error, having sent nothing, when len(res) != len(ops)
// or an op fails counter.ValidateOp.
func (s *Store) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	if err := rules.CheckTake(ops, res); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	nowUS := int64(-1) // the script reads TIME
	if s.callerClock {
		nowUS = now.UnixMicro()
		if nowUS < 0 || nowUS > maxClockUS {
			return errClock
		}
	}
	if s.cluster == nil && s.masterFor == nil {
		w := s.getWaiter()
		s.prepare(&w.call, ops, nil, nowUS, false)
		if s.co != nil {
			if gone, err := s.co.do(ctx, w); gone {
				return err // w is the flusher's now
			}
		} else {
			w.run(ctx, s, s.node)
			if w.err == nil {
				s.replies.Add(1)
			}
		}
		err := w.err
		if err == nil {
			err = w.decode(ops, res, s.callerNow(&nowUS))
		}
		s.putWaiter(w)
		return err
	}
	err := s.takeCluster(ctx, ops, res, nowUS)
	if err == nil {
		s.replies.Add(1)
	}
	return err
}

// callerNow returns nowUS when the caller's clock decides (a reply must
// then carry it back), nil otherwise.
func (s *Store) callerNow(nowUS *int64) *int64 {
	if s.callerClock {
		return nowUS
	}
	return nil
}
