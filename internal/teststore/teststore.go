// Package teststore holds the store wrappers tests share: a rules.Store
// that counts its calls, so a test can say how many round trips a request
// makes through the real engine or server. Tests only; safe for concurrent
// use as the store it wraps is.
package teststore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// Counting is a rules.Store that counts the Take calls it passes to Store,
// without allocating.
type Counting struct {
	rules.Store
	// Calls is the number of Take calls so far.
	Calls atomic.Int64
}

// Take counts the call and passes it on.
func (c *Counting) Take(ctx context.Context, now time.Time, ops []rules.Op, res []rules.Result) error {
	c.Calls.Add(1)
	return c.Store.Take(ctx, now, ops, res)
}

var _ rules.Store = (*Counting)(nil)
