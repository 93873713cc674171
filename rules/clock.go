package rules

import "time"

// Clock tells the time. The request path never holds one: the handler reads
// the time once per request and passes now down. Background loops (the
// memstore sweeper, failclosed's breaker) hold a Clock so tests can fake it.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
