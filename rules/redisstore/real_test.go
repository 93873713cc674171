package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// The tests of this file run against a real redis-server at
// $EDGE_REDIS_ADDR (host:port), and skip without it;
// testdata/start-redis.sh starts one.

func redisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("EDGE_REDIS_ADDR")
	if addr == "" {
		t.Skip("EDGE_REDIS_ADDR is not set: no real Redis to test against (testdata/start-redis.sh starts one)")
	}
	return addr
}

// testPrefix returns a key prefix unique to one test run, so that a test
// can scan exactly its own keys on a shared server.
func testPrefix(name string) string {
	return fmt.Sprintf("edgetest:%s:%x:", name, rand.Uint64())
}

// rawClient returns a plain client to the server, for inspecting it.
func rawClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	return c
}

// keyPattern is what every key of a Store with prefix p looks like: the
// prefix, then the 24-byte rules.Key in hex in a hash tag, and for a
// sliding_log's timestamps ":log". No request input appears raw.
func keyPattern(p string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(p) + `\{[0-9a-f]{48}\}(:log)?$`)
}

// checkKeys scans the keys under prefix p with c and fails t for any key
// without a TTL or not of keyPattern's shape. It returns the number of keys.
func checkKeys(t *testing.T, ctx context.Context, c redis.Cmdable, p string) int {
	t.Helper()
	re := keyPattern(p)
	n := 0
	iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		n++
		if !re.MatchString(k) {
			t.Errorf("key %q: want %s", k, re)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 {
			t.Errorf("key %q: PTTL %v, want a TTL", k, ttl)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConformanceRedis runs the conformance tables against a real Redis
// reached each way a fleet reaches one (transports, managed_test.go):
// plain, over TLS, and through Sentinel.
func TestConformanceRedis(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			base, raw := tr.start(t)
			testConformance(t, base, raw)
		})
	}
}

func testConformance(t *testing.T, base Options, raw *redis.Client) {
	prefix := testPrefix("conformance")
	t.Run("caller_clock", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) rules.Store {
			o := base
			o.Prefix, o.UseCallerClock, o.Timeout, o.DialTimeout = prefix, true, conformanceBudget, conformanceBudget
			return mustNew(t, o)
		})
	})
	// Every key the whole suite left has a TTL, and no raw input in its
	// name.
	n := checkKeys(t, context.Background(), raw, prefix)
	if n == 0 {
		t.Error("the suite left no keys: the scan looked in the wrong place")
	}
	t.Logf("%d keys, each with a TTL", n)
}

// commandCalls returns the calls of cmd (lowercase) INFO commandstats
// reports, summed over the servers.
func commandCalls(t *testing.T, ctx context.Context, cs []*redis.Client, cmd string) int64 {
	t.Helper()
	var total int64
	for _, c := range cs {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(info))
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "cmdstat_"+cmd+":calls=")
			if !ok {
				continue
			}
			v, _, _ := strings.Cut(line, ",")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
	}
	return total
}

func multiOps(label string) []rules.Op {
	var ops []rules.Op
	for i, alg := range []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.FixedWindow, rules.SlidingWindow, rules.SlidingLog} {
		var k rules.Key
		copy(k[:], label)
		k[20] = byte(i)
		ops = append(ops, rules.Op{Kind: rules.OpTake, Algorithm: alg, Key: k, Limit: 100, Burst: 100, PeriodUS: 60_000_000, Cost: 1, Enforce: true})
	}
	return ops
}

// TestOneRoundTrip: a Take of five ops, one of each algorithm, is exactly
// one EVALSHA on the server, and nothing else (not run in parallel with
// the other tests, which share the server's counters).
//
// It runs over each transport (plain, TLS, Sentinel: managed_test.go).
func TestOneRoundTrip(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			base, raw := tr.start(t)
			testOneRoundTrip(t, base, raw)
		})
	}
}

func testOneRoundTrip(t *testing.T, base Options, c *redis.Client) {
	ctx := context.Background()
	base.Prefix, base.Timeout = testPrefix("roundtrip"), time.Second
	s := mustNew(t, base)
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	ops := multiOps("roundtrip")
	res := make([]rules.Result, len(ops))
	// Warm the pool: a new connection is not part of the count.
	if err := s.Take(ctx, time.Now(), ops, res); err != nil {
		t.Fatal(err)
	}
	const takes = 20
	before := map[string]int64{}
	cmds := []string{"evalsha", "eval", "get", "set"}
	for _, cmd := range cmds {
		before[cmd] = commandCalls(t, ctx, []*redis.Client{c}, cmd)
	}
	for range takes {
		if err := s.Take(ctx, time.Now(), ops, res); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range cmds {
		got := commandCalls(t, ctx, []*redis.Client{c}, cmd) - before[cmd]
		want := int64(0)
		if cmd == "evalsha" {
			want = takes
		}
		// Commands a script runs are counted too (get, set): only the
		// script's own calls show up there, never the client's.
		if cmd == "get" || cmd == "set" {
			if got != takes*int64(len(ops)) {
				t.Errorf("cmdstat_%s: got %d calls from %d takes of %d ops, want %d (from inside the script)", cmd, got, takes, len(ops), takes*len(ops))
			}
			continue
		}
		if got != want {
			t.Errorf("cmdstat_%s: got %d calls for %d takes, want %d", cmd, got, takes, want)
		}
	}
	for i := range res {
		if !res[i].Allowed {
			t.Errorf("op %d refused: %+v", i, res[i])
		}
	}
}

// TestNoScript: after SCRIPT FLUSH (as after a restart or a failover), the
// next Take gets NOSCRIPT, runs the script by EVAL, and counts once.
func TestNoScript(t *testing.T) {
	addr := redisAddr(t)
	ctx := context.Background()
	s := mustNew(t, Options{URL: "redis://" + addr, Prefix: testPrefix("noscript"), Timeout: time.Second})
	defer s.Close()
	c := rawClient(t, addr)
	op := rules.Op{Kind: rules.OpTake, Algorithm: rules.FixedWindow, Key: rules.Key{'n', 's'}, Limit: 10, PeriodUS: 3600_000_000, Cost: 1, Enforce: true}
	res := make([]rules.Result, 1)
	for i := range 3 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Take(ctx, time.Now(), []rules.Op{op}, res); err != nil {
			t.Fatalf("take %d after SCRIPT FLUSH: %v", i, err)
		}
		if want := int64(10 - i - 1); res[0].Remaining != want {
			t.Fatalf("take %d after SCRIPT FLUSH: got %d left, want %d (counted once)", i, res[0].Remaining, want)
		}
	}
	if got := s.Stats().NoScript; got != 3 {
		t.Errorf("Stats().NoScript: got %d, want 3", got)
	}
	// EVAL cached the script again: the next call needs no fallback.
	if err := s.Take(ctx, time.Now(), []rules.Op{op}, res); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().NoScript; got != 3 {
		t.Errorf("Stats().NoScript after a normal call: got %d, want 3", got)
	}
}

// TestServerTimeSmoke runs the TIME path on a real server, in real time: a
// GCRA burst of 5 at 5 per 10s passes, the sixth request is refused with a
// RetryAfter of at most one emission interval (2s), less the few
// milliseconds the burst took.
func TestServerTimeSmoke(t *testing.T) {
	testServerTimeSmoke(t, "redis://"+redisAddr(t))
}

func testServerTimeSmoke(t *testing.T, url string) {
	ctx := context.Background()
	s := mustNew(t, Options{URL: url, Prefix: testPrefix("smoke"), Timeout: time.Second})
	defer s.Close()
	op := rules.Op{Kind: rules.OpTake, Algorithm: rules.GCRA, Key: rules.Key{'s', 'm'}, Limit: 5, Burst: 5, PeriodUS: 10_000_000, Cost: 1, Enforce: true}
	res := make([]rules.Result, 1)
	start := time.Now()
	for i := range 5 {
		// now is deliberately wrong: the server's clock decides.
		if err := s.Take(ctx, time.Unix(0, 0), []rules.Op{op}, res); err != nil {
			t.Fatal(err)
		}
		if !res[0].Allowed || res[0].Remaining != int64(4-i) {
			t.Fatalf("request %d of the burst: got %+v, want allowed with %d left", i, res[0], 4-i)
		}
	}
	if err := s.Take(ctx, time.Unix(0, 0), []rules.Op{op}, res); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	const interval = 2 * time.Second
	got := res[0]
	if got.Allowed {
		t.Fatalf("the sixth request: got allowed, want refused")
	}
	if got.RetryAfter <= interval-elapsed-time.Millisecond || got.RetryAfter > interval {
		t.Errorf("RetryAfter: got %v, want in (%v, %v] (%v elapsed)", got.RetryAfter, interval-elapsed, interval, elapsed)
	}
	// Refused: t (ResetAfter) is the wait itself (counter.Settle).
	if got.ResetAfter != got.RetryAfter {
		t.Errorf("ResetAfter: got %v, want RetryAfter (%v)", got.ResetAfter, got.RetryAfter)
	}
}
