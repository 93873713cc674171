package failclosed

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/redisstore"
	"github.com/edge-gateway/edge/rules/storetest"
)

// Proxy modes: pass forwards both ways; late lets commands reach Redis and
// drops its replies, as a node too busy to read them before the call's
// budget would (Redis answered; the caller had given up); silent drops the
// commands, so Redis never answers (paused, blackholed).
const (
	pass int32 = iota
	late
	silent
)

// replyProxy is a proxy in front of a real redis-server that counts the
// reply chunks Redis sends, whatever it then does with them (mode): the
// count a Liveness store keeps of its backend's answers.
type replyProxy struct {
	*testredis.Proxy
	mode    atomic.Int32
	replies atomic.Uint64
}

func newReplyProxy(t *testing.T, target string) *replyProxy {
	t.Helper()
	p := &replyProxy{}
	p.Proxy = testredis.NewProxy(t, target,
		func(net.Conn, []byte) bool { return p.mode.Load() != silent },
		func(net.Conn, []byte) bool {
			p.replies.Add(1)
			return p.mode.Load() == pass
		})
	return p
}

// proxiedStore is the Redis store behind a replyProxy, made a Liveness by
// the proxy's count: what redisstore would report if it counted the
// replies it reads, late ones included.
type proxiedStore struct {
	*redisstore.Store
	p *replyProxy
}

func (s proxiedStore) Replies() uint64 { return s.p.replies.Load() }

// waitReplies waits until the proxy has seen more than n replies, bounded
// by a generous deadline so that a bug fails the test instead of hanging
// it. It waits for an event of a real process; nothing is timed.
func waitReplies(t *testing.T, p *replyProxy, n uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for p.replies.Load() <= n {
		select {
		case <-ctx.Done():
			t.Fatalf("redis sent no reply after %d (a hang guard: it answers in microseconds)", n)
		case <-tick.C:
		}
	}
}

// TestRealRedisLateIsNotLost runs the breaker over the real Redis store
// and a real redis-server. Redis answers every call but the node drops the
// replies (late): every call fails at its budget and is refused by its
// on_store_error, and the breaker never opens, so each call still reaches
// Redis. Redis silent: the same failures open it. The breaker's time is a
// fake clock, moved by FailureSpan's worth between calls; the calls' own
// budgets are redisstore's, which only have to pass.
func TestRealRedisLateIsNotLost(t *testing.T) {
	r := testredis.Start(t)
	p := newReplyProxy(t, r.Addr())
	// A budget a loaded machine meets: the calls below fail because their
	// replies are dropped, not because the budget is short.
	// Uncoalesced: a call's connection reads for one budget and is
	// dropped, so each call reaches Redis on a connection of its own. (A
	// coalescing store reads its pipelines for 20 budgets, so that late
	// replies are read: replies the proxy drops would be silence to it,
	// its flushers waiting out that deadline while the calls fail.)
	rs, err := redisstore.New(redisstore.Options{URL: "redis://" + p.Addr() + "/0", Timeout: 50 * time.Millisecond, DisableCoalescing: true})
	if err != nil {
		t.Fatal(err)
	}
	const span = 10 * time.Millisecond
	c := newFakeClock()
	s := newStore(t, proxiedStore{rs, p}, Options{Clock: c, NoBackgroundProbe: true, FailureSpan: span})
	// Set-up: a few tries, in case the machine is so loaded that Redis
	// misses even that budget (the fake clock does not move, so failures
	// here cannot open the breaker, and a success closes it).
	o := op(1, rules.FailClosed, 1000, time.Minute)
	healthy := false
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.Check(ctx)
		cancel()
		if err != nil {
			continue
		}
		if res := take(t, s, storetest.Base, o); res[0].Allowed && !res[0].StoreError {
			healthy = true
			break
		}
	}
	if !healthy || s.State() != BreakerClosed {
		t.Fatalf("through the proxy, Redis never answered within 50ms in 10 tries (state %v, last error %v)", s.State(), s.LastError())
	}
	base := s.Stats()

	p.mode.Store(late)
	const calls = 12
	for i := range calls {
		before := p.replies.Load()
		if res := take(t, s, storetest.Base, o); res[0].Allowed || !res[0].StoreError {
			t.Fatalf("late call %d: got %+v, want refused by on_store_error (its reply was dropped)", i, res[0])
		}
		if s.State() != BreakerClosed {
			t.Fatalf("late call %d: breaker %v, want closed: Redis is answering", i, s.State())
		}
		waitReplies(t, p, before) // Redis did answer it
		c.Advance(span / 2)
	}
	st := s.Stats()
	if s.State() != BreakerClosed || st.BreakerOpens != 0 || st.ShortCircuits != 0 {
		t.Fatalf("replies late over %v: got %v, %d opens, %d short circuits; want closed, every call sent to Redis",
			calls*span/2, s.State(), st.BreakerOpens, st.ShortCircuits)
	}
	if n := st.StoreErrors - base.StoreErrors; n != calls || st.OpensWithheld == 0 {
		t.Errorf("got %d store errors and %d opens withheld, want %d and some", n, st.OpensWithheld, calls)
	}

	// Silent: a reply still on its way from the late phase may restart
	// the run once; the loop allows for it.
	p.mode.Store(silent)
	for i := 0; s.State() == BreakerClosed; i++ {
		if i == 2*calls {
			t.Fatalf("Redis silent for %v: breaker still closed after %d failed calls", time.Duration(i)*span/2, i)
		}
		if res := take(t, s, storetest.Base, o); res[0].Allowed || !res[0].StoreError {
			t.Fatalf("silent call %d: got %+v, want refused by on_store_error", i, res[0])
		}
		c.Advance(span / 2)
	}
	if s.State() != BreakerOpen || s.Stats().BreakerOpens != 1 {
		t.Errorf("Redis silent: got %v and %d opens, want open once", s.State(), s.Stats().BreakerOpens)
	}
}
