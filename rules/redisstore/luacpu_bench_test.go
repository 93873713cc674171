package redisstore

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
)

// BenchmarkScriptCPU measures the Redis CPU a decision costs with take.lua
// and with another version of the script (a baseline), side by side in one
// run against $EDGE_REDIS_ADDR: it loads both, sends the same calls, built
// by prepare as Take builds them, to each on keys of its own, and
// alternates the two in rounds (A B A B …) so that the machine's drift
// hits both alike and the spread of the rounds shows the noise. Each round
// resets the server's stats (CONFIG RESETSTAT) and reads, per decision:
//
//	redis-us   the server's CPU, user + sys (INFO cpu used_cpu_user and
//	           used_cpu_sys deltas): the script and the command's I/O
//	script-us  the script calls' own time (INFO commandstats
//	           cmdstat_evalsha usec), divided by the decisions they made:
//	           wall time, which counts the server being descheduled
//
// and reports the medians of the rounds. b.N is the number of decisions
// per script (use -benchtime Nx); ns/op is the wall time of both. Modes: direct is one call per round trip (a store
// with DisableCoalescing, or a cluster's node); pipelined is 8 script
// calls per round trip from each of two connections (coalescing's
// flushers); shared is 8 takes in one script call (coalescing's shared
// call, which only a script with a batch mode runs). Every reply is
// decoded as Take decodes it, so a script that answers wrongly fails the
// benchmark. The baseline is the file $EDGE_TAKE_LUA_BASELINE, and the
// benchmark skips without it; for take.lua without its fast path, or an
// earlier take.lua:
//
//	sed 's/^if mode == 0 and not port then$/if false then/' rules/redisstore/take.lua >/tmp/general.lua
//	git show cae3ad6:rules/redisstore/take.lua >/tmp/base.lua
//	EDGE_REDIS_ADDR=127.0.0.1:6395 EDGE_TAKE_LUA_BASELINE=/tmp/base.lua \
//	    go test -run '^$' -bench ScriptCPU -benchtime 30000x ./rules/redisstore/
//
// Run it on a server of its own: the CPU of other clients' commands would
// count (BENCHMARKS.md, "Redis script: fast path vs general path").
func BenchmarkScriptCPU(b *testing.B) {
	addr := redisAddr(b)
	path := os.Getenv("EDGE_TAKE_LUA_BASELINE")
	if path == "" {
		b.Skip("EDGE_TAKE_LUA_BASELINE is not set: no script to compare take.lua with")
	}
	baseline, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DisableIdentity: true, PoolSize: 4})
	defer rdb.Close()
	scripts := []cpuScript{{name: "take.lua", src: takeScript}, {name: "baseline", src: string(baseline)}}
	for i := range scripts {
		sha, err := rdb.ScriptLoad(ctx, scripts[i].src).Result()
		if err != nil {
			b.Fatal(err)
		}
		scripts[i].sha = sha
	}

	op := func(alg rules.Algorithm, kind rules.OpKind, tag byte, i int) rules.Op {
		// Limits no benchmark reaches: every decision is an allowed take
		// that writes its key, the common case.
		return rules.Op{Kind: kind, Algorithm: alg, Key: rules.Key{'c', tag, byte(i >> 8), byte(i)}, Limit: 1_000_000, Burst: 1_000_000, PeriodUS: 1_000_000, Cost: 1, Enforce: true}
	}
	mixes := []struct {
		name string
		ops  func(i int) []rules.Op
	}{
		{"1op_gcra", func(i int) []rules.Op { return []rules.Op{op(rules.GCRA, rules.OpTake, 1, i)} }},
		{"1op_token_bucket", func(i int) []rules.Op { return []rules.Op{op(rules.TokenBucket, rules.OpTake, 2, i)} }},
		{"1op_leaky_bucket", func(i int) []rules.Op { return []rules.Op{op(rules.LeakyBucket, rules.OpTake, 3, i)} }},
		{"1op_fixed_window", func(i int) []rules.Op { return []rules.Op{op(rules.FixedWindow, rules.OpTake, 4, i)} }},
		{"1op_sliding_window", func(i int) []rules.Op { return []rules.Op{op(rules.SlidingWindow, rules.OpTake, 5, i)} }},
		// A login route (testdata/fixtures/policies/login.hcl): gcra per
		// client, the failures counter of account and client checked
		// (count = "failures" peeks before the origin answers), and a
		// sliding_window per network.
		{"3ops_login", func(i int) []rules.Op {
			return []rules.Op{
				op(rules.GCRA, rules.OpTake, 6, i),
				op(rules.SlidingWindow, rules.OpPeek, 7, i),
				op(rules.SlidingWindow, rules.OpTake, 8, i),
			}
		}},
		// bench/policy.hcl's five rules, as the engine compiles them:
		// gcra per address, sliding_window per network, token_bucket per
		// API key, gcra per route and the per-address gcra in dry run
		// (not enforcing), in format 2's names, as bench/run.sh -redis
		// sends them.
		{"5ops_bench", func(i int) []rules.Op {
			ops := []rules.Op{
				{Algorithm: rules.GCRA, Limit: 100_000, Burst: 100_000, PeriodUS: 1_000_000},
				{Algorithm: rules.SlidingWindow, Limit: 1_000_000, PeriodUS: 10_000_000},
				{Algorithm: rules.TokenBucket, Limit: 100_000, Burst: 100_000, PeriodUS: 1_000_000},
				{Algorithm: rules.GCRA, Limit: 1_000_000, Burst: 1_000_000, PeriodUS: 1_000_000},
				{Algorithm: rules.GCRA, Limit: 50_000, Burst: 50_000, PeriodUS: 1_000_000},
			}
			for j := range ops {
				ops[j].Kind, ops[j].Cost, ops[j].Enforce, ops[j].KeyFormat = rules.OpTake, 1, j < 4, rules.KeyFormat2
				ops[j].Key = rules.Key{'c', 14 + byte(j), byte(i >> 8), byte(i)}
			}
			return ops
		}},
		{"5ops_mixed", func(i int) []rules.Op {
			var ops []rules.Op
			for j, alg := range []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.FixedWindow, rules.SlidingWindow, rules.LeakyBucket} {
				ops = append(ops, op(alg, rules.OpTake, 9+byte(j), i))
			}
			return ops
		}},
	}
	modes := []struct {
		name       string
		conns      int // connections sending at once
		depth      int // script calls per round trip
		shareDepth int // takes per script call (1: a call each)
	}{
		{"direct", 1, 1, 1},
		{"pipelined", 2, 8, 1},
		{"shared", 2, 1, 8},
	}
	for _, mode := range modes {
		for _, mix := range mixes {
			b.Run(mode.name+"/"+mix.name, func(b *testing.B) {
				b.ReportAllocs()
				prefix := testPrefix("cpu")
				runs := make([]*cpuRun, len(scripts))
				for v := range scripts {
					s := mustNew(b, Options{URL: "redis://" + addr, Prefix: prefix + scripts[v].name + ":", DisableCoalescing: true})
					runs[v] = newCPURun(s, scripts[v].sha, mix.ops, mode.depth, mode.shareDepth)
					s.Close()
					runs[v].send(ctx, b, rdb, benchKeys, mode.conns) // warm: every key exists
				}
				rounds := min(8, b.N)
				per := make([][]cpuMeasure, len(scripts))
				for r := range rounds {
					n := b.N/rounds + boolInt(r < b.N%rounds)
					for v := range scripts {
						// Alternate which script goes first, so that neither
						// always follows the other.
						if r%2 == 1 {
							v = len(scripts) - 1 - v
						}
						m := runs[v].measure(ctx, b, rdb, n, mode.conns)
						per[v] = append(per[v], m)
						b.Logf("round %d %-8s %6d decisions: redis %6.2f µs, script %6.2f µs a decision", r+1, scripts[v].name, m.decisions, m.redis(), m.script())
					}
				}
				b.StopTimer()
				// The medians of the rounds: a round another process
				// disturbed moves them less than it would a mean.
				cur, base := median(per[0], cpuMeasure.redis), median(per[1], cpuMeasure.redis)
				b.ReportMetric(cur, "take.lua-redis-us/dec")
				b.ReportMetric(base, "baseline-redis-us/dec")
				b.ReportMetric(median(per[0], cpuMeasure.script), "take.lua-script-us/dec")
				b.ReportMetric(median(per[1], cpuMeasure.script), "baseline-script-us/dec")
				b.ReportMetric(100*(1-cur/base), "redis-saved-%")
			})
		}
	}
}

type cpuScript struct{ name, src, sha string }

// cpuMeasure is what a round measured: decisions made, and the server's
// CPU and the script calls' time for them, in µs.
type cpuMeasure struct {
	decisions         int
	redisUS, scriptUS float64
}

// redis and script are the round's figures per decision, in µs.
func (m cpuMeasure) redis() float64  { return m.redisUS / float64(m.decisions) }
func (m cpuMeasure) script() float64 { return m.scriptUS / float64(m.decisions) }

// median returns the median of f over ms.
func median(ms []cpuMeasure, f func(cpuMeasure) float64) float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// cpuRun is one script's calls for one mix: benchKeys prepared calls,
// each on keys of its own, sent in order round and round.
type cpuRun struct {
	ops        [][]rules.Op
	calls      []*call
	sha        string
	depth      int
	shareDepth int
	next       int
	mu         sync.Mutex
}

func newCPURun(s *Store, sha string, mix func(i int) []rules.Op, depth, shareDepth int) *cpuRun {
	r := &cpuRun{sha: sha, depth: depth, shareDepth: shareDepth}
	for i := range benchKeys {
		ops := mix(i)
		c := &call{}
		s.prepare(c, ops, nil, -1, false)
		c.args[1] = sha
		r.ops = append(r.ops, ops)
		r.calls = append(r.calls, c)
	}
	return r
}

// batch returns the indexes of the next k calls.
func (r *cpuRun) batch(k int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	idx := make([]int, k)
	for j := range idx {
		idx[j] = r.next
		r.next = (r.next + 1) % len(r.calls)
	}
	return idx
}

// command returns the script call of the calls idx: one call's own, or one
// shared script call of them all (as flusher.sharedArgs builds it).
func (r *cpuRun) command(idx []int) *redis.Cmd {
	if len(idx) == 1 {
		return redis.NewCmd(context.Background(), r.calls[idx[0]].args...)
	}
	nk := 0
	for _, i := range idx {
		nk += r.calls[i].nkeys
	}
	args := []any{"evalsha", r.sha, nk}
	for _, i := range idx {
		c := r.calls[i]
		args = append(args, c.args[cmdHead:cmdHead+c.nkeys]...)
	}
	args = append(args, int64(-len(idx)))
	for _, i := range idx {
		c := r.calls[i]
		args = append(args, c.args[cmdHead+c.nkeys:]...)
	}
	return redis.NewCmd(context.Background(), args...)
}

// check decodes a script call's reply as Take does.
func (r *cpuRun) check(idx []int, cmd *redis.Cmd) error {
	if err := cmd.Err(); err != nil {
		return err
	}
	replies := []any{cmd.Val()}
	if len(idx) > 1 {
		arr, ok := cmd.Val().([]any)
		if !ok || len(arr) != len(idx) {
			return ErrMalformedReply
		}
		replies = arr
	}
	for j, i := range idx {
		c, ops := r.calls[i], r.ops[i]
		c.reply = replies[j]
		res := make([]rules.Result, len(ops))
		if err := c.decode(ops, res, nil); err != nil {
			return err
		}
		for k := range res {
			if !res[k].Allowed {
				return fmt.Errorf("op %d of call %d refused: the limits are meant never to be reached", k, i)
			}
		}
	}
	return nil
}

// send makes n decisions (rounded up to whole round trips) from conns
// connections at once.
func (r *cpuRun) send(ctx context.Context, b *testing.B, rdb *redis.Client, n, conns int) int {
	per := r.depth * r.shareDepth // decisions per round trip
	trips := (n + per - 1) / per
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := range conns {
		share := trips/conns + boolInt(c < trips%conns)
		wg.Go(func() {
			pipe := rdb.Pipeline()
			for range share {
				idx := make([][]int, r.depth)
				cmds := make([]*redis.Cmd, r.depth)
				for d := range cmds {
					idx[d] = r.batch(r.shareDepth)
					cmds[d] = r.command(idx[d])
					_ = pipe.Process(ctx, cmds[d])
				}
				if _, err := pipe.Exec(ctx); err != nil {
					errs <- err
					return
				}
				for d := range cmds {
					if err := r.check(idx[d], cmds[d]); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return trips * per
}

// measure makes about n decisions and returns what they cost the server.
func (r *cpuRun) measure(ctx context.Context, b *testing.B, rdb *redis.Client, n, conns int) cpuMeasure {
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	before := usedCPU(ctx, b, rdb)
	d := r.send(ctx, b, rdb, n, conns)
	after := usedCPU(ctx, b, rdb)
	return cpuMeasure{decisions: d, redisUS: after - before, scriptUS: evalshaUS(ctx, b, rdb)}
}

// usedCPU returns the server's used_cpu_user + used_cpu_sys in µs.
func usedCPU(ctx context.Context, b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += f * 1e6
		}
	}
	return total
}

// evalshaUS returns cmdstat_evalsha's usec since the last CONFIG RESETSTAT.
func evalshaUS(ctx context.Context, b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				us, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				return us
			}
		}
	}
	b.Fatal("INFO commandstats has no cmdstat_evalsha")
	return 0
}
