package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Coalescing (the package doc's "Coalescing"): concurrent Takes on one
// server hand their script calls to a few flushers, each of which writes
// what is queued, up to maxBatch calls, in one pipeline (one write, one
// read of the replies) and hands each caller its reply. The fast path's
// takes go in one shared script call, the others in one each; every
// Take's ops are in one script call, atomic on the server and never
// retried.

const (
	// defaultFlushers is the number of pipelines a store keeps in flight
	// at once: while one waits for its replies, the calls queued meanwhile
	// go out in the next.
	defaultFlushers = 2
	// spareFlushers is the number of pipelines more a store with the
	// default flushers puts in flight while its recent latency is over a
	// budget (a slow link): a call queued behind two pipelines of 16
	// budgets each would wait its whole overloadBudgets for a flusher
	// (BenchmarkSlowRedisLink at +80ms: 45% of logins on_store_error's
	// with none, 22% with 14, measured with spareFlushers 6 in docs/deploying.md).
	// 8 pipelines in all stay within go-redis' smallest default pool (10
	// connections a CPU).
	spareFlushers = 6
	// maxBatch bounds a pipeline's calls.
	maxBatch = 128
	// overloadBudgets bounds, in budgets, how long a call may wait while
	// the store is answering but late, or the node is too busy to run the
	// flusher that carries it (the package doc's "Failures and the time
	// budget"). It is also the coalesced client's read and write deadline,
	// so that a pipeline whose replies come late is read, not dropped.
	overloadBudgets = 20
	// silenceBudgets is how long, in budgets, a pipeline may be out with
	// nothing heard from the store since it was written before the store
	// counts as silent: calls past their budget then fail. Not 2: on a
	// saturated 2-core node a flusher holding a reply already in its
	// socket can go unscheduled that long (bench/run.sh at a 5ms budget:
	// 2.7% and 16% of requests store errors with 2, 0.3% with 4).
	silenceBudgets = 4
	// latencyFactor is how many times the store's recent latency (a
	// decaying maximum of the time its answered pipelines took) a
	// pipeline may be out, with nothing heard, before the store counts as
	// silent, when that is longer than silenceBudgets budgets: a link that
	// is steadily slow is late, not silent (issue 25, section 3: with
	// 50 ms added to every reply and a 5 ms budget, a fixed 4 budgets
	// refused 87% of logins).
	latencyFactor = 2
	// latencyDecay is the share (1/latencyDecay) of the gap by which the
	// recent latency falls toward a pipeline answered faster.
	latencyDecay = 8
)

// Waiter states: a waiter is queued or in flight, answered (the flusher
// set its reply and signalled done) or abandoned (its caller's budget or
// context ended first; the flusher puts it back in the pool).
const (
	waiting int32 = iota
	answered
	abandoned
)

// waiter is a call a Take hands to the coalescer, with the caller's side
// of the handoff. Waiters are pooled per Store.
type waiter struct {
	call
	done  chan struct{} // capacity 1: the flusher's answer
	timer *time.Timer   // the caller's budget, reset per call
	state atomic.Int32
}

func newWaiter() *waiter {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{done: make(chan struct{}, 1), timer: t}
}

// budgetError is the error of a call whose budget passed before its reply
// came: a timeout, as the client's own would be.
type budgetError struct{}

func (budgetError) Error() string   { return "redisstore: no reply within the time budget (i/o timeout)" }
func (budgetError) Timeout() bool   { return true }
func (budgetError) Temporary() bool { return true }

// errBudget is preallocated: an outage must not become an allocation storm.
var errBudget error = budgetError{}

// coalescer batches the script calls of one server's Takes.
type coalescer struct {
	s      *Store
	client *redis.Client
	budget time.Duration
	ctx    context.Context // the flushers' (cancelled by close)
	cancel context.CancelFunc

	// failing is whether the last pipeline a flusher finished failed
	// below the script (a dial, write or read error, a timeout): the
	// store, not the node, is slow or down. A queued call past its budget
	// fails then, and waits on otherwise.
	failing atomic.Bool

	// epoch is when the coalescer started (its monotonic reading is the
	// clock of out); heard counts the pipelines the store answered, with
	// replies or its own error replies, late ones included; out holds,
	// per flusher, the pipeline it has out.
	epoch time.Time
	heard atomic.Uint64
	out   []outstanding
	// latency is the store's recent latency in nanoseconds: a decaying
	// maximum of the time from writing a pipeline to reading its replies,
	// over the pipelines the store answered (received).
	latency atomic.Int64
	// late counts calls decided by a reply that came after their budget
	// (Stats.LateReplies).
	late atomic.Uint64
	// clock, when set (tests only), replaces the monotonic clock of now.
	clock func() int64

	mu     sync.Mutex
	queue  []*waiter
	closed bool

	wake    chan struct{} // capacity 1: the queue is not empty
	spare   chan struct{} // capacity 1: the queue is not empty and the store is slow
	quit    chan struct{}
	wg      sync.WaitGroup
	flushes atomic.Uint64
	shared  atomic.Uint64 // calls sent in shared script calls
}

// newCoalescer starts flushers flushers, woken by every call, and spares
// more, woken only while the store is slow (co.slow).
func newCoalescer(s *Store, client *redis.Client, budget time.Duration, flushers, spares int) *coalescer {
	co := &coalescer{
		s:      s,
		client: client,
		budget: budget,
		wake:   make(chan struct{}, 1),
		spare:  make(chan struct{}, 1),
		quit:   make(chan struct{}),
	}
	co.ctx, co.cancel = context.WithCancel(context.Background())
	co.epoch = time.Now()
	co.out = make([]outstanding, flushers+spares)
	for i := range flushers + spares {
		wake := co.wake
		if i >= flushers {
			wake = co.spare
		}
		co.wg.Go(func() { co.run(&co.out[i], wake) })
	}
	return co
}

// slow reports whether the store's recent latency is over a budget: a
// call queued behind the pipelines out would wait more than its budget,
// so the spare flushers carry calls too.
func (co *coalescer) slow() bool { return co.latency.Load() > int64(co.budget) }

// signal wakes a flusher, and a spare one too while the store is slow.
func (co *coalescer) signal() {
	select {
	case co.wake <- struct{}{}:
	default:
	}
	if co.slow() {
		select {
		case co.spare <- struct{}{}:
		default:
		}
	}
}

// outstanding is a flusher's pipeline in flight: when it was written
// (nanoseconds since the coalescer's epoch; 0 when none is out) and the
// coalescer's heard count then.
type outstanding struct {
	since atomic.Int64
	mark  atomic.Uint64
}

// now is the time since co.epoch in nanoseconds, plus one (0 marks no
// pipeline out). It reads the monotonic clock only.
func (co *coalescer) now() int64 {
	if co.clock != nil {
		return co.clock() + 1
	}
	return int64(time.Since(co.epoch)) + 1
}

// sent records that a flusher wrote a pipeline, now.
func (co *coalescer) sent(o *outstanding) {
	o.mark.Store(co.heard.Load())
	o.since.Store(co.now())
}

// received records that a flusher's pipeline is done, and whether the
// store answered it (replies, its own error replies, or part of them
// before a failure).
func (co *coalescer) received(o *outstanding, answered bool) {
	if answered {
		if since := o.since.Load(); since != 0 {
			co.observe(co.now() - since)
		}
		co.heard.Add(1)
	}
	o.since.Store(0)
}

// observe folds an answered pipeline's latency d (nanoseconds) into
// co.latency: a longer one is taken at once, a shorter one closes
// 1/latencyDecay of the gap, so that one fast reply between slow ones does
// not make the next slow one look like silence.
func (co *coalescer) observe(d int64) {
	for {
		cur := co.latency.Load()
		next := d
		if d < cur {
			next = cur - (cur-d)/latencyDecay
		}
		if next == cur || co.latency.CompareAndSwap(cur, next) {
			return
		}
	}
}

// silence is how long, in nanoseconds, a pipeline may be out with nothing
// heard before the store counts as silent: silenceBudgets budgets, or
// latencyFactor times the store's recent latency when that is longer (the
// wait's overloadBudgets bounds it in any case).
func (co *coalescer) silence() int64 {
	return max(int64(silenceBudgets*co.budget), latencyFactor*co.latency.Load())
}

// silent reports whether a pipeline has been out for co.silence() or more
// with no pipeline answered since it was written: the store is down,
// asleep or cut off, not late. A node too busy to write a pipeline is not
// the store's silence: with no pipeline out, it never is.
func (co *coalescer) silent() bool {
	now := co.now()
	silence := co.silence()
	for i := range co.out {
		o := &co.out[i]
		since := o.since.Load()
		if since == 0 || now-since < silence {
			continue
		}
		// Read since again after mark: a flusher that finished this
		// pipeline and wrote the next meanwhile has moved both.
		if co.heard.Load() == o.mark.Load() && o.since.Load() == since {
			return true
		}
	}
	return false
}

// do queues w's prepared call and waits for its reply, as wait says, or
// until ctx ends. It returns whether w was abandoned (its caller
// must then leave it: the flusher puts it back in the pool) and, if so,
// the error; otherwise w.reply and w.err hold the answer.
func (co *coalescer) do(ctx context.Context, w *waiter) (bool, error) {
	w.state.Store(waiting)
	w.timer.Reset(co.budget)
	co.mu.Lock()
	if co.closed {
		co.mu.Unlock()
		w.timer.Stop()
		w.reply, w.err = nil, redis.ErrClosed
		return false, nil
	}
	co.queue = append(co.queue, w)
	co.mu.Unlock()
	co.signal()
	err := co.wait(ctx, w)
	if err == nil {
		return false, nil
	}
	if w.state.CompareAndSwap(waiting, abandoned) {
		return true, err
	}
	<-w.done // answered meanwhile: the reply is there
	return false, nil
}

// wait waits for w's answer (nil) or the end of its wait: errBudget or
// ctx's error.
//
// The budget bounds the store's silence, not its lateness nor the node's.
// A call past its budget goes on waiting, while the store answers, for a
// reply the store sends late or a flusher busy on a node too loaded to run
// it soon; it fails when the last pipeline failed below the script (the
// store is down: queued calls then fail at their budget, not after the
// pipelines ahead of them), when the store is silent (a pipeline has been
// out co.silence() with nothing heard since it was written: asleep, paused
// or cut off), or after overloadBudgets budgets in all, which is also the
// client's read deadline of a pipeline. A reply after the budget counts in
// co.late.
func (co *coalescer) wait(ctx context.Context, w *waiter) error {
	var extended time.Duration
	for {
		select {
		case <-w.done:
			w.timer.Stop()
			if extended > 0 {
				co.late.Add(1)
			}
			return nil
		case <-w.timer.C:
			if co.failing.Load() || extended >= (overloadBudgets-1)*co.budget || co.silent() {
				return errBudget
			}
			step := co.budget / 2
			extended += step
			w.timer.Reset(step)
		case <-ctx.Done():
			w.timer.Stop()
			return ctx.Err()
		}
	}
}

// answer hands w its reply, or puts it back in the pool when its caller
// has gone. The flusher must not touch w afterwards.
func (co *coalescer) answer(w *waiter) {
	if w.state.CompareAndSwap(waiting, answered) {
		w.done <- struct{}{}
		return
	}
	co.s.putWaiter(w)
}

// run is a flusher: it waits for calls (a signal on wake: co.wake, or
// co.spare for a spare flusher) and sends what is queued, a pipeline at a
// time, until close.
func (co *coalescer) run(o *outstanding, wake <-chan struct{}) {
	f := flusher{pipe: co.client.Pipeline(), batch: make([]*waiter, 0, maxBatch), cmds: make([]redis.Cmder, 0, maxBatch)}
	for {
		select {
		case <-wake:
		case <-co.quit:
			return
		}
		for {
			f.batch = co.next(f.batch[:0])
			if len(f.batch) == 0 {
				break
			}
			co.flush(&f, o)
			// Drop what the pooled waiters hold until the next flush.
			clear(f.batch)
			clear(f.cmds)
			clear(f.alone)
			clear(f.shared)
			clear(f.args)
		}
	}
}

// flusher is a flusher's pipeline and reused slices.
type flusher struct {
	pipe   redis.Pipeliner
	batch  []*waiter
	cmds   []redis.Cmder
	alone  []*waiter // the batch's calls sent as script calls of their own
	shared []*waiter // the batch's calls sent together as one script call
	args   []any     // the shared script call's arguments
}

// next moves up to maxBatch queued waiters to dst, and wakes another
// flusher when some remain.
func (co *coalescer) next(dst []*waiter) []*waiter {
	co.mu.Lock()
	n := min(len(co.queue), maxBatch)
	dst = append(dst, co.queue[:n]...)
	rest := copy(co.queue, co.queue[n:])
	clear(co.queue[rest:])
	co.queue = co.queue[:rest]
	co.mu.Unlock()
	if rest > 0 {
		co.signal()
	}
	return dst
}

// flush sends f.batch's calls in one pipeline and answers each. Takes of
// take.lua's fast path (no sliding_log, no undo payloads) go together as
// one script call when there are two or more of them (the package doc's
// "Coalescing"); the others go as script calls of their own. A call
// answered NOSCRIPT did not run: those go again by EVAL, in one more
// pipeline. Calls whose callers have gone are not sent. o is the
// flusher's record of its pipeline in flight; the replies it reads, late
// ones included, count in the Store's Replies.
func (co *coalescer) flush(f *flusher, o *outstanding) {
	pipe := f.pipe
	f.alone, f.shared = f.alone[:0], f.shared[:0]
	for _, w := range f.batch {
		switch {
		case w.state.Load() == abandoned:
			co.s.putWaiter(w)
		case w.shareable:
			f.shared = append(f.shared, w)
		default:
			f.alone = append(f.alone, w)
		}
	}
	if len(f.shared) == 1 {
		f.alone, f.shared = append(f.alone, f.shared[0]), f.shared[:0]
	}
	if len(f.alone)+len(f.shared) == 0 {
		return
	}
	f.cmds = f.cmds[:0]
	for _, w := range f.alone {
		f.cmds = append(f.cmds, w.command()) // a shared call's own command is never built
	}
	var shared *redis.Cmd
	if len(f.shared) > 0 {
		shared = redis.NewCmd(context.Background(), f.sharedArgs()...)
		f.cmds = append(f.cmds, shared)
		co.shared.Add(uint64(len(f.shared)))
	}
	_ = pipe.BatchProcess(co.ctx, f.cmds...) // one allocation: the pipeline's own slice
	co.sent(o)
	_, execErr := pipe.Exec(co.ctx)
	co.flushes.Add(1)
	co.received(o, co.count(f.cmds))
	co.failing.Store(ioFailed(f.cmds) || (execErr != nil && !isReply(execErr)))
	retry := 0
	for _, w := range f.alone {
		w.reply, w.err = callResult(w.cmd, execErr)
		if w.err != nil && redis.HasErrorPrefix(w.err, "NOSCRIPT") && w.state.Load() == waiting {
			f.alone[retry] = w
			retry++
			continue
		}
		co.answer(w)
	}
	var sharedReply any
	var sharedErr error
	if shared != nil {
		sharedReply, sharedErr = callResult(shared, execErr)
		if sharedErr == nil || !redis.HasErrorPrefix(sharedErr, "NOSCRIPT") {
			co.answerShared(f.shared, sharedReply, sharedErr)
			shared = nil
		}
	}
	if retry == 0 && shared == nil {
		return
	}
	evals := make([]*redis.Cmd, retry)
	for i, w := range f.alone[:retry] {
		evals[i] = w.evalCommand()
		_ = pipe.Process(co.ctx, evals[i])
	}
	var sharedEval *redis.Cmd
	if shared != nil {
		sharedEval = evalOf(f.args)
		_ = pipe.Process(co.ctx, sharedEval)
	}
	co.s.sawNoScript(uint64(len(evals)))
	if sharedEval != nil {
		co.s.sawNoScript(1)
	}
	co.sent(o)
	_, execErr = pipe.Exec(co.ctx)
	retried := f.cmds[:0]
	for _, c := range evals {
		retried = append(retried, c)
	}
	if sharedEval != nil {
		retried = append(retried, sharedEval)
	}
	co.received(o, co.count(retried))
	for i, w := range f.alone[:retry] {
		w.reply, w.err = callResult(evals[i], execErr)
		co.answer(w)
	}
	if sharedEval != nil {
		sharedReply, sharedErr = callResult(sharedEval, execErr)
		co.answerShared(f.shared, sharedReply, sharedErr)
	}
}

// sharedArgs returns the shared script call of f.shared, in f.args: EVALSHA,
// the SHA, the calls' keys in order, then ARGV: minus the number of calls
// and each call's own ARGV in order (take.lua's batch). The elements are
// the calls' own arguments, boxed once already.
func (f *flusher) sharedArgs() []any {
	nk := 0
	for _, w := range f.shared {
		nk += w.nkeys
	}
	args := append(f.args[:0], "evalsha", shaArg, nk)
	for _, w := range f.shared {
		args = append(args, w.args[cmdHead:cmdHead+w.nkeys]...)
	}
	args = append(args, int64(-len(f.shared)))
	for _, w := range f.shared {
		args = append(args, w.args[cmdHead+w.nkeys:]...)
	}
	f.args = args
	return args
}

// answerShared hands each call of a shared script call its own reply, the
// reply's elements in order, or the call's error to all.
func (co *coalescer) answerShared(ws []*waiter, reply any, err error) {
	arr, ok := reply.([]any)
	if err == nil && (!ok || len(arr) != len(ws)) {
		err = ErrMalformedReply
	}
	for i, w := range ws {
		if err != nil {
			w.reply, w.err = nil, err
		} else {
			w.reply, w.err = arr[i], nil
		}
		co.answer(w)
	}
}

// callResult returns a pipelined command's reply and error. Each command
// carries its own error, except when the pipeline failed before any
// command ran (the connection's setup: AUTH refused, SELECT of a database
// the server does not have): then the command has neither reply nor
// error, and the pipeline's error is its.
func callResult(c *redis.Cmd, execErr error) (any, error) {
	v, err := c.Val(), c.Err()
	if err == nil && v == nil && execErr != nil {
		err = execErr
	}
	return v, err
}

// isReply reports whether err is the server's own error reply.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// close stops queuing, fails what is queued and stops the flushers; the
// caller closes the client (which ends a flusher's round trip in flight)
// and then waits for them (waitFlushers).
func (co *coalescer) close() {
	co.mu.Lock()
	co.closed = true
	q := co.queue
	co.queue = nil
	co.mu.Unlock()
	close(co.quit)
	co.cancel()
	for _, w := range q {
		w.reply, w.err = nil, redis.ErrClosed
		co.answer(w)
	}
}

func (co *coalescer) waitFlushers() { co.wg.Wait() }

// count adds cmds' script results to the Store's Replies and reports
// whether the store answered any of them (a result, or its own error
// reply: a script error, NOSCRIPT, a redirect).
func (co *coalescer) count(cmds []redis.Cmder) bool {
	var results uint64
	answered := false
	for _, c := range cmds {
		switch err := c.Err(); {
		case err == nil:
			// A pipeline that failed before any command ran (callResult)
			// leaves its commands without reply or error.
			if cmd, ok := c.(*redis.Cmd); ok && cmd.Val() != nil {
				results++
				answered = true
			}
		case err == redis.Nil || isReply(err):
			answered = true
		}
	}
	co.s.replies.Add(results)
	return answered
}

// ioFailed reports whether a pipeline failed below the script: a command
// that has an error which is not the server's reply (redis.Error: the
// script's own error, NOSCRIPT, a cluster redirect), which means the
// dial, write or read failed or timed out.
func ioFailed(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && err != redis.Nil && !isReply(err) {
			return true
		}
	}
	return false
}
