package gateway

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// callLog is what a recordingStore and the test's origin saw, in order:
// each store call as the kind of its ops, each request reaching the
// origin as "origin".
type callLog struct {
	mu      sync.Mutex
	entries []string
}

func (l *callLog) add(e string) { l.mu.Lock(); l.entries = append(l.entries, e); l.mu.Unlock() }

// take returns the entries since the last take.
func (l *callLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.entries
	l.entries = nil
	return out
}

// recordingStore logs each Take call: "main" when it holds an OpTake (the
// main call), "peek" when it holds only peeks (the gate's precheck, or
// the main call of a request refused whatever the counters say), "write"
// otherwise (the after call, Settle's), with "+refund" and "+add" when it
// holds those kinds.
type recordingStore struct {
	rules.Store
	log *callLog
}

func (r *recordingStore) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	take, peeks, refund, add := false, true, false, false
	for i := range ops {
		switch ops[i].Kind {
		case rules.OpTake:
			take = true
		case rules.OpRefund:
			refund = true
		case rules.OpAdd:
			add = true
		}
		peeks = peeks && ops[i].Kind == rules.OpPeek
	}
	e := "write"
	switch {
	case take:
		e = "main"
	case peeks:
		e = "peek"
	}
	if refund {
		e += "+refund"
	}
	if add {
		e += "+add"
	}
	r.log.add(e)
	return r.Store.Take(ctx, now, ops, res)
}

// requestShape is every request's store calls, as docs/architecture.md
// ("The decision pipeline") bounds them: at most one before the main call
// (the gate's precheck), the main call, at most one after it before the
// answer (the after call: bans written, units and leases given back),
// then, for a request the origin answered, at most one more (Settle).
var requestShape = regexp.MustCompile(`^(peek )?((main|peek)[+a-z]* )?(write[+a-z]* )?(origin (write[+a-z]* )?)?$`)

// TestStoreCallsPerRequest: through the real server on the shipped
// policies.hcl, every request of a login and OTP session with a
// credential-stuffing run that trips and serves a ban makes at most one
// store call before its main one and one after it (and Settle's, once the
// origin answered): the request that trips the ban makes three, the
// precheck, the main call and the after call that writes the ban; a
// banned one only the precheck.
func TestStoreCallsPerRequest(t *testing.T) {
	p := loadPolicy(t, "policies.hcl")
	clk := &fakeClock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	ms, err := memstore.New(memstore.Options{MaxKeys: nodecfg.Of(p).Store.MaxKeys, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	log := &callLog{}
	n := startNode(t, p, nodeOptions{clock: clk, store: &recordingStore{Store: ms, log: log},
		origin: func(h fasthttp.RequestHandler) fasthttp.RequestHandler {
			return func(ctx *fasthttp.RequestCtx) { log.add("origin"); h(ctx) }
		}})
	w := &crowd{t: t, n: n}
	seen := map[string]int{}
	check := func(what string) {
		t.Helper()
		calls := log.take()
		shape := strings.Join(calls, " ") + " "
		if len(calls) == 0 {
			shape = ""
		}
		if !requestShape.MatchString(shape) {
			t.Errorf("%s: store calls %q: want at most one before the main call and one after it (and Settle's)", what, calls)
		}
		seen[shape]++
	}

	user := w.caller("203.0.113.10", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")
	user.page()
	check("the user's login page")
	if got := user.login("alice", "letmein-demo"); got != http.StatusOK {
		t.Fatalf("the user's login: %d, want 200", got)
	}
	check("the user's login")
	if st, ch := user.send("+14155550101"); st == http.StatusOK {
		check("the user's OTP send")
		user.verify("+14155550101", ch)
		check("the user's OTP verify")
	} else {
		t.Fatalf("the user's OTP send: %d, want 200", st)
	}

	// Credential stuffing from one address: ten failing accounts an hour,
	// then the ban (login-accounts-per-ip, ban_scope = "sensitive").
	attacker := w.caller("198.51.100.7", "python-requests/2.31")
	tripped := false
	for i := range 14 {
		clk.Advance(13 * time.Second) // under login-per-visitor's 5 a minute
		st := attacker.login(fmt.Sprintf("victim%d", i), "wrong")
		check(fmt.Sprintf("the attacker's login %d (%d)", i+1, st))
		tripped = tripped || st == http.StatusTooManyRequests
	}
	if !tripped {
		t.Fatal("the stuffing run was never refused: the scenario tests nothing")
	}
	if got := attacker.signup("a@example.com"); got != http.StatusTooManyRequests {
		t.Errorf("the banned attacker's signup: %d, want 429", got)
	}
	check("the banned attacker's signup")
	if got := user.login("alice", "letmein-demo"); got != http.StatusOK {
		t.Errorf("the user's login after the attack: %d, want 200", got)
	}
	check("the user's second login")

	// The scenario reached every part of the bound: the trip's precheck,
	// main call and after call (the ban written), and the ban's refusals
	// by the precheck alone.
	if seen["peek main write+add "] == 0 || seen["peek "] == 0 {
		t.Errorf("shapes seen %v: want the trip's \"peek main write+add\" and the ban's \"peek\"", seen)
	}
}
