package failclosed

import (
	"context"
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// TestHoldSensitive: while a hold lasts (a Redis that came back empty,
// within reset_grace), a call with an op of a sensitive rule that does not
// fail open is answered by its ops' on_store_error without reaching the
// store: a fail-closed take refuses, with StoreError. A call without one
// (an ordinary rule, or a sensitive rule's ban check, which fails open)
// reaches the store as before. From the hold's end on, or once it is
// ended with the zero time, every call reaches the store.
func TestHoldSensitive(t *testing.T) {
	inner := &fakeStore{}
	s := newStore(t, inner, Options{})
	ctx := context.Background()
	sensitive := op(1, rules.FailClosed, 5, time.Minute)
	sensitive.Sensitive = true
	banCheck := op(2, rules.FailOpen, 5, time.Minute)
	banCheck.Sensitive = true
	ordinary := op(3, rules.FailOpen, 5, time.Minute)
	take := func(at time.Time, ops ...rules.Op) []rules.Result {
		t.Helper()
		res := make([]rules.Result, len(ops))
		if err := s.Take(ctx, at, ops, res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	until := storetest.Base.Add(5 * time.Minute)
	s.HoldSensitive(until)

	before := inner.calls.Load()
	if res := take(storetest.Base, sensitive, ordinary); res[0].Allowed || !res[0].StoreError || !res[1].Allowed || !res[1].StoreError {
		t.Errorf("a sensitive call in the hold: got %+v, want its fail-closed take refused and the ordinary one allowed, both StoreError", res)
	}
	if inner.calls.Load() != before {
		t.Error("a sensitive call in the hold reached the store")
	}
	for _, ops := range [][]rules.Op{{ordinary}, {banCheck, ordinary}} {
		if res := take(storetest.Base, ops...); !res[0].Allowed || res[0].StoreError {
			t.Errorf("a call without a fail-closed sensitive op in the hold: got %+v, want the store's answer", res)
		}
	}
	if got := inner.calls.Load() - before; got != 2 {
		t.Errorf("%d calls without a fail-closed sensitive op reached the store, want 2", got)
	}
	if got := s.Stats().ResetHolds; got != 1 {
		t.Errorf("Stats().ResetHolds = %d, want 1", got)
	}

	if res := take(until, sensitive); !res[0].Allowed || res[0].StoreError {
		t.Errorf("a sensitive call at the hold's end: got %+v, want the store's answer", res)
	}
	s.HoldSensitive(until.Add(time.Hour))
	s.HoldSensitive(time.Time{})
	if res := take(storetest.Base, sensitive); !res[0].Allowed || res[0].StoreError {
		t.Errorf("a sensitive call after the hold was ended: got %+v, want the store's answer", res)
	}
}
