package failclosed

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// syncBuffer is a log sink safe for the prober's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestCheck: a failed Check opens the breaker at once (a node that cannot
// reach its store at start is degraded from its first request); the
// prober closes it within two cooldowns of the store answering, and the
// transitions are logged. The prober runs in a synctest bubble: its
// cooldowns pass on the fake clock, so the bound is exact on any machine.
func TestCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const cooldown = 10 * time.Millisecond
		f := &pingStore{}
		f.setErr(errDown)
		var logs syncBuffer
		s := newStore(t, f, Options{Cooldown: cooldown, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		if err := s.Check(context.Background()); err == nil {
			t.Fatal("Check of a store that is down returned nil")
		}
		if s.State() != BreakerOpen {
			t.Fatalf("after a failed Check: got %v, want open", s.State())
		}
		if degraded, reason := s.Degraded(); !degraded || !strings.Contains(reason, "connection refused") {
			t.Errorf("Degraded: got %v %q, want degraded with the error", degraded, reason)
		}
		if res := take(t, s, time.Now(), op(1, rules.FailClosed, 10, time.Minute)); res[0].Allowed || !res[0].StoreError {
			t.Errorf("first request after a failed Check: got %+v, want a fail-closed answer", res[0])
		}
		f.setErr(nil)
		time.Sleep(2 * cooldown)
		synctest.Wait() // the prober has probed and is waiting again
		recovered := strings.Contains(logs.String(), `"msg":"store recovered: circuit breaker closed"`)
		if !recovered || s.State() != BreakerClosed {
			t.Fatalf("two cooldowns after the store answers again: breaker %v, recovery logged %v; want closed, logged", s.State(), recovered)
		}
		if err := s.Check(context.Background()); err != nil || s.State() != BreakerClosed {
			t.Errorf("Check of a healthy store: %v, %v", err, s.State())
		}
		out := logs.String()
		for _, want := range []string{`"level":"WARN","msg":"store failing: circuit breaker open`, "connection refused", `"why":"check failed"`, `"outage":`} {
			if !strings.Contains(out, want) {
				t.Errorf("logs lack %q:\n%s", want, out)
			}
		}
	})
}

// TestHealthInterval: an idle node pings its store every HealthInterval
// and notices it going down without a request paying for it; a busy node
// sends no pings. In a synctest bubble: ticks and requests on the fake
// clock, so the counts are exact.
func TestHealthInterval(t *testing.T) {
	const every = 10 * time.Millisecond
	t.Run("idle_notices_outage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &pingStore{}
			s := newStore(t, f, Options{HealthInterval: every})
			time.Sleep(2 * every)
			synctest.Wait()
			if got := f.pings.Load(); got != 2 {
				t.Fatalf("an idle node sent %d pings in %v, want one every %v", got, 2*every, every)
			}
			if s.State() != BreakerClosed {
				t.Fatalf("healthy store: breaker %v", s.State())
			}
			f.setErr(errDown)
			time.Sleep(DefaultFailureThreshold * every) // that many failed pings open it
			synctest.Wait()
			if s.State() == BreakerClosed {
				t.Fatalf("an idle node did not notice its store going down in %d pings (breaker %v)", DefaultFailureThreshold, s.State())
			}
			if got := f.calls.Load(); got != 0 {
				t.Errorf("the pings went through Take %d times: Ping must be used", got)
			}
		})
	})
	t.Run("busy_sends_none", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &pingStore{}
			s := newStore(t, f, Options{HealthInterval: every})
			o := op(2, rules.FailOpen, 1_000_000, time.Minute)
			for range 200 { // a request every tenth of an interval, for 20 intervals
				take(t, s, time.Now(), o)
				time.Sleep(every / 10)
			}
			synctest.Wait()
			if got := f.pings.Load(); got != 0 {
				t.Errorf("a busy node sent %d pings: traffic checks the store by itself", got)
			}
		})
	})
	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &pingStore{}
			newStore(t, f, Options{})
			time.Sleep(5 * every)
			synctest.Wait()
			if got := f.pings.Load(); got != 0 {
				t.Errorf("without HealthInterval: %d pings, want none", got)
			}
		})
	})
}

// keysRefusedStore answers Ping and refuses every Take with its err, as a
// Redis whose ACL allows PING and SCRIPT LOAD but not the rules' keys.
type keysRefusedStore struct{ fakeStore }

func (*keysRefusedStore) Ping(context.Context) error { return nil }

var errNoPerm = errors.New("NOPERM No permissions to access a key")

// TestRefused: a refused call (Options.Refusal) makes Refused report it at
// once, breaker closed or not; an idle node's health pings, which the
// store answers, do not end it while a call like the rules' is still
// refused; the first answered call does, and says so in the log. An error
// that is not a refusal is never one.
func TestRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &keysRefusedStore{}
		f.setErr(errNoPerm)
		var logs syncBuffer
		s := newStore(t, f, Options{
			HealthInterval: time.Second, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
			Refusal: func(err error) bool { return errors.Is(err, errNoPerm) },
		})
		if refused, _ := s.Refused(); refused {
			t.Fatal("Refused before any call")
		}
		take(t, s, time.Now(), op(1, rules.FailClosed, 10, time.Minute))
		refused, reason := s.Refused()
		if !refused || !strings.Contains(reason, "store refuses this node: NOPERM") {
			t.Fatalf("after a refused call: Refused %v %q, want the refusal", refused, reason)
		}
		time.Sleep(3 * time.Second) // idle: the prober pings, and peeks
		synctest.Wait()
		if refused, _ := s.Refused(); !refused {
			t.Error("answered pings ended a refusal the rules' calls still get")
		}
		f.setErr(nil)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if refused, reason := s.Refused(); refused {
			t.Errorf("the store takes calls again: Refused %v %q, want not", refused, reason)
		}
		if !strings.Contains(logs.String(), "store accepts this node again") {
			t.Errorf("the end of the refusal is not logged:\n%s", logs.String())
		}
		f.setErr(errDown)
		take(t, s, time.Now(), op(1, rules.FailClosed, 10, time.Minute))
		if refused, _ := s.Refused(); refused {
			t.Error("a connection error counted as a refusal")
		}
	})
}
