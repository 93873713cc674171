package failclosed

import (
	"testing"
	"time"

	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/storetest"
)

// TestLocalCostOverLocalCapacity: a weighted op costing more than its
// local bucket (limit ÷ fleet size) holds takes the whole bucket while the
// store is down, and the next waits for it to refill, rather than being
// refused for ever (RetryNever).
func TestLocalCostOverLocalCapacity(t *testing.T) {
	t.Parallel()
	for _, alg := range []rules.Algorithm{rules.GCRA, rules.TokenBucket, rules.LeakyBucket, rules.FixedWindow, rules.SlidingWindow, rules.SlidingLog} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			s := newStore(t, &fakeStore{err: errDown}, Options{FleetSize: 10, NoBackgroundProbe: true, Clock: newFakeClock()})
			o := op(1, rules.FailLocal, 100, time.Hour) // 10 a node locally
			o.Algorithm, o.Cost = alg, 50
			res := take(t, s, storetest.Base, o)
			if !res[0].StoreError || !res[0].Allowed || res[0].Remaining != 0 {
				t.Fatalf("first: %+v, want allowed by the local bucket with nothing left", res[0])
			}
			res = take(t, s, storetest.Base, o)
			if res[0].Allowed || res[0].RetryAfter <= 0 {
				t.Errorf("second: %+v, want refused with a finite wait", res[0])
			}
			small := o
			small.Cost = 3
			if res := take(t, s, storetest.Base, small); res[0].Allowed {
				t.Errorf("a cost of 3 after the bucket was spent: %+v, want refused", res[0])
			}
		})
	}
}
