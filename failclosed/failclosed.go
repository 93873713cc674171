package failclosed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

const (
	// DefaultFailureThreshold is the number of consecutive failed calls
	// that opens the breaker when Options.FailureThreshold is 0.
	DefaultFailureThreshold = 3
	// DefaultCooldown is how long an open breaker waits before probing when
	// Options.Cooldown is 0: short, so a node is healthy again well within
	// a second of its store returning.
	DefaultCooldown = 200 * time.Millisecond
	// DefaultProbeTimeout bounds a probe when Options.ProbeTimeout is 0.
	DefaultProbeTimeout = time.Second
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// FleetSize is the number of nodes sharing the store (the policy's
	// fleet_size; 1 when 0). A FailLocal op is decided by a local bucket at
	// its Limit and Burst divided by FleetSize, rounded up, at least 1.
	FleetSize int
	// Clock tells the breaker the time (rules.SystemClock when nil). Take's
	// now is the request's time and drives the deny cache and the local
	// buckets; the breaker's cooldown is the node's own.
	Clock rules.Clock
	// FailureThreshold is the number of consecutive failed calls that opens
	// the breaker (DefaultFailureThreshold when 0).
	FailureThreshold int
	// FailureSpan, when not 0, is how long the consecutive failures must
	// have lasted, from the first to the one that would open the breaker,
	// before it opens. A store that coalesces calls fails every call of a
	// round trip at once, and a node whose cores are all busy can miss one
	// reply's deadline: either is a burst of failures within microseconds,
	// which should cost the calls it failed and not a Cooldown of every
	// call. A store that is down keeps failing, so it still opens the
	// breaker, FailureSpan after its first failure. The edge node sets it
	// to two store budgets.
	FailureSpan time.Duration
	// Cooldown is how long an open breaker answers without calling the
	// store before one call probes it (DefaultCooldown when 0).
	Cooldown time.Duration
	// ProbeTimeout is how long a half-open breaker waits for its probe
	// before letting another call probe, in case the inner store ignores
	// its budget, and the background probe's deadline
	// (DefaultProbeTimeout when 0).
	ProbeTimeout time.Duration
	// NoBackgroundProbe turns off the background prober: only requests
	// probe an open breaker. A node with no traffic then stays degraded
	// until a request comes; tests that script the breaker with a fake
	// Clock use it.
	NoBackgroundProbe bool
	// LocalMaxKeys bounds the deny cache, and the local fallback buckets
	// of ops without a key budget of their own (memstore.DefaultMaxKeys
	// when 0; the Engine's ops carry their rule's, rules.Op.MaxKeys, which
	// the local memory store keeps apart as the node's memory store does:
	// docs/memory-store.md). The deny cache is allocated
	// once, at about 52 bytes a key rounded up to a power of two (the OS
	// commits its pages as they are first written).
	LocalMaxKeys int
	// NoDenyCache turns off the deny cache: every call reaches the store
	// (while the breaker is closed), and a healthy Store is transparent.
	NoDenyCache bool
	// HealthInterval, when not 0, has the background prober ping the store
	// while the breaker is closed and no call has reached the store for
	// that long, a failed ping counting as a failed call: an idle node
	// then notices its store going down, and /readyz says so before the
	// first request pays for it. Traffic checks the store by itself, so a
	// busy node sends no pings. Ignored with NoBackgroundProbe.
	HealthInterval time.Duration
	// Logger receives the breaker's transitions: a warning when it opens
	// (the store is failing, with its last error) and a line when it
	// closes (the store is back, with the outage's length). Nil: none.
	Logger *slog.Logger
	// Refusal, when set, reports whether an error of the inner store is
	// the store refusing this node rather than failing to answer it: its
	// credentials or its permissions (redisstore.IsAuthError: WRONGPASS,
	// NOAUTH, NOPERM). Such an error is a configuration's, which waiting
	// does not mend: Refused reports it from the first call it fails until
	// the store next answers a call or a probe, so that /readyz can fail
	// while it lasts. Nil: no error is a refusal.
	Refusal func(error) bool
}

// Pinger is implemented by inner stores that can check their backend
// without deciding anything. The background prober uses Ping when the
// inner store has it, and otherwise a Take of one OpPeek (which never
// writes) on a key no rule can have.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Liveness is implemented by inner stores that can tell a backend that
// answers late from one that does not answer. Replies returns the number of
// answers the backend has sent to calls since the store was created (a
// script's result or a ping's, not an error reply), counting those read
// after their call's budget had passed, when the call had already failed:
// a late answer is evidence that the backend is up. It must be safe for
// concurrent use and cheap (an atomic load): an open breaker reads it on
// every call.
//
// With a Liveness inner store the breaker opens on silence: a run of
// failures during which Replies moved does not open it (Stats.OpensWithheld
// counts those), and an open breaker whose store has answered since it
// opened lets the next call probe without waiting out Cooldown. A node so
// busy that its calls miss their budget while the store answers then goes
// on deciding in the store, each call that misses its budget answered by
// its rule's on_store_error, instead of answering every call by
// on_store_error for a Cooldown (docs/attacks.md, "Saturation fail-open").
// A store that is down or silent sends no replies and opens the breaker as
// before.
type Liveness interface {
	Replies() uint64
}

// Stats are a Store's counters since New, node-wide, for
// nodestore.StoreMetrics to export (this package imports no metrics
// library). Per-rule decisions
// (edge_decisions_total{decision="store_error_allow"|"store_error_deny"})
// come from the Engine's outcomes, which read Result.StoreError. Fields
// named for ops count ops; the others count Take calls.
type Stats struct {
	// StoreErrors counts inner calls that failed (edge_store_errors_total),
	// probes included; a call whose ctx was cancelled is not counted.
	StoreErrors uint64
	// ShortCircuits counts calls answered by on_store_error without
	// calling the store, because the breaker was open or half-open.
	ShortCircuits uint64
	// FallbackAllow counts ops allowed by on_store_error = "allow"
	// (store_error_allow); FallbackDeny ops refused by "deny"
	// (store_error_deny: 503).
	FallbackAllow, FallbackDeny uint64
	// LocalAllow and LocalDeny count ops the local bucket decided under
	// on_store_error = "local".
	LocalAllow, LocalDeny uint64
	// DenyCacheHits counts calls the deny cache answered.
	DenyCacheHits uint64
	// BreakerOpens counts transitions from closed to open; Probes counts
	// half-open probes (request and background).
	BreakerOpens, Probes uint64
	// OpensWithheld counts runs of failures that would have opened the
	// breaker but did not, the inner store (a Liveness) having answered
	// during them: its calls were late, not lost.
	OpensWithheld uint64
	// ResetHolds counts calls answered by on_store_error without calling
	// the store because a sensitive op met a hold (HoldSensitive).
	ResetHolds uint64
}

type counters struct {
	storeErrors, shortCircuits                         atomic.Uint64
	fallbackAllow, fallbackDeny, localAllow, localDeny atomic.Uint64
	denyHits, breakerOpens, probes, opensWithheld      atomic.Uint64
	resetHolds                                         atomic.Uint64
}

// Store is a rules.Store that wraps another with a breaker, a deny cache
// and per-op on_store_error answers. Create one with New.
type Store struct {
	inner rules.Store
	local *memstore.Store
	deny  *denyCache // nil with NoDenyCache
	fleet atomic.Int64
	// hold is HoldSensitive's end in microseconds since the Unix epoch
	// (0: none).
	hold  atomic.Int64
	clock rules.Clock
	epoch time.Time // the clock at New; breaker times count from it
	br    breaker
	n     counters

	errMu     sync.Mutex
	lastErr   error
	refusedBy error     // the refusal in force (Options.Refusal), nil when none; under errMu
	refusedAt time.Time // when it began, on the Clock; under errMu

	refusal func(error) bool // Options.Refusal
	refused atomic.Bool      // refusedBy != nil, read without the lock on every answered call

	pool sync.Pool // *scratch, for the local fallback

	called      atomic.Bool // a call reached the inner store since the prober last looked (HealthInterval)
	healthEvery time.Duration
	log         *slog.Logger // nil: no logging

	wake      chan struct{} // the breaker opened: buffered, never blocks
	stop      chan struct{}
	done      chan struct{} // nil without a background prober
	cancel    context.CancelFunc
	probeCtx  context.Context
	closeOnce sync.Once
	closeErr  error
}

var _ rules.Store = (*Store)(nil)

// probeKey is the key of the background probe's OpPeek. A peek never
// writes, so even a rule whose name hashed to these bytes would not notice.
var probeKey = rules.Key{0xff, 'f', 'a', 'i', 'l', 'c', 'l', 0xff, 'p', 'r', 'o', 'b', 'e'}

// New returns a Store in front of inner and starts its background prober.
// The Store owns inner from then on: Close closes it.
func New(inner rules.Store, opts Options) (*Store, error) {
	switch {
	case inner == nil:
		return nil, errors.New("failclosed: inner store is nil")
	case opts.FleetSize < 0:
		return nil, fmt.Errorf("failclosed: fleet size %d is negative", opts.FleetSize)
	case opts.FailureThreshold < 0:
		return nil, fmt.Errorf("failclosed: failure threshold %d is negative", opts.FailureThreshold)
	case opts.FailureSpan < 0:
		return nil, fmt.Errorf("failclosed: failure span %v is negative", opts.FailureSpan)
	case opts.Cooldown < 0:
		return nil, fmt.Errorf("failclosed: cooldown %v is negative", opts.Cooldown)
	case opts.ProbeTimeout < 0:
		return nil, fmt.Errorf("failclosed: probe timeout %v is negative", opts.ProbeTimeout)
	case opts.HealthInterval < 0:
		return nil, fmt.Errorf("failclosed: health interval %v is negative", opts.HealthInterval)
	case opts.LocalMaxKeys < 0:
		return nil, fmt.Errorf("failclosed: local max keys %d is negative", opts.LocalMaxKeys)
	}
	if opts.FleetSize == 0 {
		opts.FleetSize = 1
	}
	if opts.Clock == nil {
		opts.Clock = rules.SystemClock{}
	}
	if opts.FailureThreshold == 0 {
		opts.FailureThreshold = DefaultFailureThreshold
	}
	if opts.Cooldown == 0 {
		opts.Cooldown = DefaultCooldown
	}
	if opts.ProbeTimeout == 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.LocalMaxKeys == 0 {
		opts.LocalMaxKeys = memstore.DefaultMaxKeys
	}
	local, err := memstore.New(memstore.Options{MaxKeys: opts.LocalMaxKeys, Clock: opts.Clock})
	if err != nil {
		return nil, fmt.Errorf("failclosed: creating the local store: %w", err)
	}
	s := &Store{
		inner: inner,
		local: local,
		clock: opts.Clock,
		epoch: opts.Clock.Now(),
		br: breaker{
			threshold:    int64(opts.FailureThreshold),
			span:         int64(opts.FailureSpan),
			cooldown:     int64(opts.Cooldown),
			probeTimeout: int64(opts.ProbeTimeout),
		},
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		healthEvery: opts.HealthInterval,
		log:         opts.Logger,
		refusal:     opts.Refusal,
	}
	if l, ok := inner.(Liveness); ok {
		s.br.live = l
	}
	s.fleet.Store(int64(opts.FleetSize))
	s.pool.New = func() any { return new(scratch) }
	if !opts.NoDenyCache {
		s.deny = newDenyCache(opts.LocalMaxKeys)
	}
	s.probeCtx, s.cancel = context.WithCancel(context.Background())
	if !opts.NoBackgroundProbe {
		s.done = make(chan struct{})
		go s.probeLoop()
	}
	return s, nil
}

// SetFleetSize changes the divisor of the local fallback buckets (a reload
// that changed fleet_size). n < 1 counts as 1.
func (s *Store) SetFleetSize(n int) { s.fleet.Store(int64(max(n, 1))) }

// elapsed is the breaker's time: nanoseconds since New on the Clock.
func (s *Store) elapsed() int64 { return int64(s.clock.Now().Sub(s.epoch)) }

// Take applies ops at now, as rules.Store specifies, and always answers:
// from the deny cache when an enforcing take's key is known to be over its
// limit; from the inner store while it is healthy; from each op's OnError
// mode, with StoreError set, when it is not. It returns an error only for a
// caller's bug (len(res) != len(ops), an invalid op), having called nothing.
func (s *Store) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	if err := rules.CheckTake(ops, res); err != nil {
		return err
	}
	nowUS := now.UnixMicro()
	if h := s.hold.Load(); h != 0 && nowUS < h && hasSensitive(ops) {
		s.n.resetHolds.Add(1)
		s.fallback(ctx, now, ops, res)
		return nil
	}
	if s.deny != nil && s.deny.live(nowUS) && s.fromDenyCache(nowUS, ops, res) {
		s.n.denyHits.Add(1)
		return nil
	}
	w := s.br.word.Load()
	var probe uint64
	if !closed(w) {
		var call bool
		if call, probe = s.br.acquire(w, s.elapsed()); !call {
			s.n.shortCircuits.Add(1)
			s.fallback(ctx, now, ops, res)
			return nil
		}
		if probe != 0 {
			s.n.probes.Add(1)
		}
	}
	if s.healthEvery > 0 && !s.called.Load() {
		s.called.Store(true) // read first: a busy node writes the line once a tick, not once a call
	}
	err := s.inner.Take(ctx, now, ops, res)
	if err != nil {
		s.failed(ctx, err, probe)
		s.fallback(ctx, now, ops, res)
		return nil
	}
	if !closed(w) || s.br.fails.Load() != 0 {
		s.succeeded()
	}
	if s.refused.Load() {
		s.accepted()
	}
	if s.deny != nil {
		s.remember(nowUS, ops, res)
	}
	return nil
}

// HoldSensitive makes every call with an op of a sensitive rule
// (Op.Sensitive) that does not fail open answered by each of its ops'
// on_store_error, without
// calling the inner store, while the call's now is before until; the zero
// time ends a hold. For a store that came back empty: its counters hold
// no history, and the policy's reset_grace has the sensitive rules answer
// as on a store error meanwhile (fail closed: 503; "local": the local
// bucket), rather than give every client a fresh allowance
// (docs/deploying.md, "A Redis that comes back empty"). Calls without a
// sensitive op go to the store as before.
func (s *Store) HoldSensitive(until time.Time) {
	if until.IsZero() {
		s.hold.Store(0)
		return
	}
	s.hold.Store(until.UnixMicro())
}

// hasSensitive reports whether ops has an op of a sensitive rule that does
// not fail open (a ban's check, which fails open, is not one).
func hasSensitive(ops []rules.Op) bool {
	for i := range ops {
		if ops[i].Sensitive && ops[i].OnError != rules.FailOpen {
			return true
		}
	}
	return false
}

// fromDenyCache answers the call if one of its enforcing takes is cached as
// refused at nowUS, and reports whether it did. Calls with an op that must
// reach the store (Attempts, Add, Refund, Reset) are never answered here.
func (s *Store) fromDenyCache(nowUS int64, ops []rules.Op, res []rules.Result) bool {
	hit := false
	for i := range ops {
		op := &ops[i]
		if op.Attempts || (op.Kind != rules.OpTake && op.Kind != rules.OpPeek) {
			return false
		}
		res[i] = rules.Result{Allowed: true}
		if op.Kind != rules.OpTake || !op.Enforce {
			continue
		}
		if retryUntil, resetUntil, ok := s.deny.lookup(&op.Key, nowUS, op.Cost); ok {
			res[i] = rules.Result{
				RetryAfter: rules.DurationUS(retryUntil - nowUS),
				ResetAfter: rules.DurationUS(max(resetUntil, retryUntil) - nowUS),
			}
			hit = true
		}
	}
	return hit
}

// remember records the call's refused enforcing takes in the deny cache,
// and drops the keys this call reset, refunded or added to.
func (s *Store) remember(nowUS int64, ops []rules.Op, res []rules.Result) {
	for i := range ops {
		op, r := &ops[i], &res[i]
		switch op.Kind {
		case rules.OpTake:
			// Attempts ops always reach the store, so caching them
			// would save nothing; dry-run refusals refuse nothing. A
			// Distinct set loses members to refunds this node never
			// sees (a concurrency rule's leases, given back by the node
			// that took them, docs/policy.md, "Concurrency limits"):
			// its refusal's wait, until the oldest member expires, can
			// be a whole lease too long, so it is not cached.
			if !r.Allowed && op.Enforce && !op.Attempts && r.RetryAfter > 0 && op.Algorithm != rules.Distinct {
				retryUntil := nowUS + r.RetryAfter.Microseconds()
				s.deny.insert(&op.Key, nowUS, op.Cost, retryUntil, nowUS+r.ResetAfter.Microseconds())
			}
		case rules.OpReset, rules.OpRefund, rules.OpAdd:
			// A reset or refund may have made the key allowed; an add
			// moved its RetryAfter. Either way the entry is stale.
			if s.deny.live(nowUS) {
				s.deny.forget(&op.Key)
			}
		}
	}
}

// failed counts a failed inner call and feeds the breaker, unless the
// caller gave up (its ctx cancelled): that says nothing about the store.
func (s *Store) failed(ctx context.Context, err error, probe uint64) {
	if errors.Is(ctx.Err(), context.Canceled) {
		if probe != 0 {
			// Hand the probe back: the next call may probe at once.
			s.br.word.CompareAndSwap(probe, pack(BreakerOpen, 0))
		}
		return
	}
	s.n.storeErrors.Add(1)
	s.recordError(err)
	opened, withheld := s.br.failure(s.elapsed(), probe)
	if opened {
		s.opened(err, "consecutive failures")
	}
	if withheld {
		s.n.opensWithheld.Add(1)
	}
}

// recordError keeps err as the last error, and as the refusal in force
// when it is one (Options.Refusal) and none was: a refusal dates from its
// first error.
func (s *Store) recordError(err error) {
	refusal := s.refusal != nil && s.refusal(err)
	s.errMu.Lock()
	s.lastErr = err
	first := refusal && s.refusedBy == nil
	if refusal {
		if first {
			s.refusedAt = s.clock.Now()
		}
		s.refusedBy = err
		s.refused.Store(true)
	}
	s.errMu.Unlock()
	if first && s.log != nil {
		s.log.Error("store refuses this node (check its credentials and ACL): rules that fail closed answer 503 and /readyz is 503 until it accepts them",
			"error", err.Error())
	}
}

// accepted ends a refusal: the store answered a call or a probe.
func (s *Store) accepted() {
	s.errMu.Lock()
	was := s.refusedBy != nil
	since := s.refusedAt
	s.refusedBy = nil
	s.refused.Store(false)
	s.errMu.Unlock()
	if was && s.log != nil {
		s.log.Info("store accepts this node again", "refused_for", s.clock.Now().Sub(since).Round(time.Millisecond).String())
	}
}

// Refused reports whether the store refuses this node (Options.Refusal:
// its last failed call or probe was refused, and nothing has been answered
// since), and why, for /readyz: the node's rules that fail closed cannot
// be served while it lasts. It implements the gateway's Health interface.
func (s *Store) Refused() (refused bool, reason string) {
	if !s.refused.Load() {
		return false, ""
	}
	s.errMu.Lock()
	err, since := s.refusedBy, s.refusedAt
	s.errMu.Unlock()
	if err == nil {
		return false, ""
	}
	return true, fmt.Sprintf("store refuses this node: %v; since %s", err, since.UTC().Format(time.RFC3339Nano))
}

// opened records the breaker's opening, for why ("consecutive failures",
// "check failed"): counted, logged, and the background prober woken.
func (s *Store) opened(err error, why string) {
	s.n.breakerOpens.Add(1)
	if s.log != nil {
		s.log.Warn("store failing: circuit breaker open; every rule answers by its on_store_error until the store is back",
			"error", err.Error(), "why", why)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// succeeded records a call the store answered, and logs the end of an
// outage when it closed the breaker.
func (s *Store) succeeded() {
	if !s.br.success() || s.log == nil {
		return
	}
	outage := time.Duration(s.elapsed() - s.br.outage.Load()).Round(time.Millisecond)
	s.log.Info("store recovered: circuit breaker closed", "outage", outage.String())
}

// Check pings the store now (Ping when the inner store has it, else a
// peek) and returns its error. A failure opens the breaker at once, without
// waiting for FailureThreshold calls: a node that cannot reach its store
// when it starts serves degraded from its first request, and /readyz says
// so. A success records a healthy store.
func (s *Store) Check(ctx context.Context) error {
	err := s.ping(ctx)
	if err == nil {
		s.succeeded()
		return nil
	}
	s.n.storeErrors.Add(1)
	s.recordError(err)
	now := s.elapsed()
	for {
		w := s.br.word.Load()
		if st, _ := unpack(w); st == BreakerOpen {
			return err
		}
		s.br.markOpen()
		if s.br.word.CompareAndSwap(w, pack(BreakerOpen, now)) {
			if closed(w) {
				s.br.outage.Store(now)
			}
			s.opened(err, "check failed")
			return err
		}
	}
}

// scratch holds the local fallback's ops and results, pooled so that an
// outage does not allocate.
type scratch struct {
	ops []rules.Op
	res []rules.Result
	idx []int // idx[j] is the position in the call of local op j
}

// fallback answers every op from its OnError mode and marks it StoreError.
// An unknown mode counts as FailClosed: refusing is the safe guess.
func (s *Store) fallback(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) {
	var nLocal int
	refused := false // a fail-closed enforcing take refuses the request
	for i := range ops {
		op := &ops[i]
		switch op.OnError {
		case rules.FailOpen:
			res[i] = rules.Result{Allowed: true, StoreError: true}
			s.n.fallbackAllow.Add(1)
		case rules.FailLocal:
			nLocal++
		default:
			res[i] = rules.Result{StoreError: true}
			s.n.fallbackDeny.Add(1)
			if op.Kind == rules.OpTake && op.Enforce {
				refused = true
			}
		}
	}
	if nLocal > 0 {
		s.fallbackLocal(ctx, now, ops, res, nLocal, refused)
	}
}

// fallbackLocal decides the FailLocal ops of a call in the local store, in
// one call (all-or-nothing among them), at their limits divided by the
// fleet size. When a fail-closed op already refuses the request, the local
// takes are asked as peeks: a refused request consumes nothing (Attempts
// ops excepted), as the Store contract says.
func (s *Store) fallbackLocal(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result, n int, refused bool) {
	sc := s.pool.Get().(*scratch)
	sc.ops, sc.res, sc.idx = sc.ops[:0], sc.res[:0], sc.idx[:0]
	fleet := s.fleet.Load()
	for i := range ops {
		if ops[i].OnError != rules.FailLocal {
			continue
		}
		op := ops[i]
		op.Limit = ceilDiv(op.Limit, fleet)
		if op.Burst > 0 {
			op.Burst = ceilDiv(op.Burst, fleet)
		}
		op.Cost = localCost(&op)
		if refused && op.Kind == rules.OpTake && !op.Attempts {
			op.Kind = rules.OpPeek
		}
		sc.ops = append(sc.ops, op)
		sc.idx = append(sc.idx, i)
	}
	if cap(sc.res) < n {
		sc.res = make([]rules.Result, n)
	}
	sc.res = sc.res[:n]
	if err := s.local.Take(ctx, now, sc.ops, sc.res); err != nil {
		// Unreachable for ops Take validated; refuse, the safe answer.
		clear(sc.res)
	}
	for j, i := range sc.idx {
		r := sc.res[j]
		r.StoreError = true
		res[i] = r
		if r.Allowed {
			s.n.localAllow.Add(1)
		} else {
			s.n.localDeny.Add(1)
		}
	}
	s.pool.Put(sc)
}

// ceilDiv returns ⌈v/n⌉, at least 1.
func ceilDiv(v, n int64) int64 {
	if n <= 1 {
		return max(v, 1)
	}
	return max((v+n-1)/n, 1)
}

// State returns the breaker's state, for a gauge.
func (s *Store) State() BreakerState { return s.br.state() }

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{
		StoreErrors:   s.n.storeErrors.Load(),
		ShortCircuits: s.n.shortCircuits.Load(),
		FallbackAllow: s.n.fallbackAllow.Load(),
		FallbackDeny:  s.n.fallbackDeny.Load(),
		LocalAllow:    s.n.localAllow.Load(),
		LocalDeny:     s.n.localDeny.Load(),
		DenyCacheHits: s.n.denyHits.Load(),
		BreakerOpens:  s.n.breakerOpens.Load(),
		Probes:        s.n.probes.Load(),
		OpensWithheld: s.n.opensWithheld.Load(),
		ResetHolds:    s.n.resetHolds.Load(),
	}
}

// LastError returns the inner store's most recent error (nil before any).
func (s *Store) LastError() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.lastErr
}

// Degraded reports whether the breaker is open or half-open, and why, for
// /readyz: the node still serves (every rule answers by its
// on_store_error), so /readyz stays 200 and says "degraded" in its body.
// It implements the gateway's Health interface.
func (s *Store) Degraded() (degraded bool, reason string) {
	st := s.br.state()
	if st == BreakerClosed {
		return false, ""
	}
	err := s.LastError()
	if err == nil {
		err = errors.New("unknown error")
	}
	what := "store unreachable"
	if s.refusal != nil && s.refusal(err) {
		what = "store refuses this node"
	}
	since := s.epoch.Add(time.Duration(s.br.outage.Load())).UTC().Format(time.RFC3339Nano)
	return true, fmt.Sprintf("%s: %v; breaker %s since %s", what, err, st, since)
}

// Close stops the background prober, then closes the inner store and the
// local one: the Store owns inner, so callers close one thing. Take must
// not be called after Close. Close may be called more than once; later
// calls return the first one's error.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.cancel() // a probe in flight gives up
		var errs []error
		if err := s.inner.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the inner store: %w", err))
		}
		if s.done != nil {
			<-s.done
		}
		if err := s.local.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the local store: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// probeLoop probes an open breaker every Cooldown, so that a node without
// traffic notices its store coming back. It sleeps on wake while the
// breaker is closed.
func (s *Store) probeLoop() {
	defer close(s.done)
	var tick <-chan time.Time
	if s.healthEvery > 0 {
		t := time.NewTicker(s.healthEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-tick:
			// Calls since the last tick checked the store already.
			if s.called.Swap(false) {
				continue
			}
			if closed(s.br.word.Load()) {
				s.healthCheck()
			}
		}
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			st, at := unpack(s.br.word.Load())
			if st == BreakerClosed {
				break
			}
			due := at + s.br.cooldown
			if st == BreakerHalfOpen {
				due = at + s.br.probeTimeout
			}
			// Poll at least every cooldown: a request's probe may have
			// reopened the breaker, or closed it, meanwhile.
			if wait := min(time.Duration(due-s.elapsed()), time.Duration(s.br.cooldown)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-s.stop:
					t.Stop()
					return
				case <-t.C:
				}
				continue
			}
			s.probeOnce()
		}
	}
}

// probeOnce probes the store if the breaker lets it.
func (s *Store) probeOnce() {
	w := s.br.word.Load()
	call, probe := s.br.acquire(w, s.elapsed())
	if !call || probe == 0 {
		return
	}
	s.n.probes.Add(1)
	ctx, cancel := context.WithTimeout(s.probeCtx, time.Duration(s.br.probeTimeout))
	defer cancel()
	if err := s.ping(ctx); err != nil {
		s.failed(ctx, err, probe)
		return
	}
	s.succeeded()
}

// ping checks the store without deciding anything: Ping when the inner
// store has it, else a Take of one OpPeek (which never writes) on
// probeKey.
//
// While the store refuses this node (Refused), a Ping it answers is
// followed by the peek: an ACL may allow PING and SCRIPT LOAD and still
// refuse the rules' keys or the script's call, and only a call like the
// rules' shows the refusal over. A ping (and peek) that succeeds ends the
// refusal.
func (s *Store) ping(ctx context.Context) error {
	err := s.pingOnce(ctx)
	if err == nil && s.refused.Load() {
		s.accepted()
	}
	return err
}

func (s *Store) pingOnce(ctx context.Context) error {
	if p, ok := s.inner.(Pinger); ok {
		if err := p.Ping(ctx); err != nil || !s.refused.Load() {
			return err
		}
	}
	ops := [1]rules.Op{{
		Kind: rules.OpPeek, Algorithm: rules.GCRA, Key: probeKey,
		Limit: 1, Burst: 1, PeriodUS: int64(time.Second / time.Microsecond), Cost: 1,
	}}
	var res [1]rules.Result
	return s.inner.Take(ctx, s.clock.Now(), ops[:], res[:])
}

// healthCheck pings a store whose breaker is closed (HealthInterval): a
// failure counts as a failed call, a success as an answered one.
func (s *Store) healthCheck() {
	ctx, cancel := context.WithTimeout(s.probeCtx, time.Duration(s.br.probeTimeout))
	defer cancel()
	if err := s.ping(ctx); err != nil {
		s.failed(ctx, err, 0)
		return
	}
	if s.br.fails.Load() != 0 {
		s.succeeded()
	}
}
