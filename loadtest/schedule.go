package main

import (
	"context"
	"math"
	"runtime"
	"time"
)

// spinWindow is how long before a deadline waitUntil stops sleeping and
// spins: timers wake up late by up to about a millisecond, never early, but
// waking up late means sending late, and spinning keeps that small.
const spinWindow = 2 * time.Millisecond

// alignStart returns the trace's t=0: the earliest multiple of window since
// the Unix epoch such that the first request, first after t=0, is at least
// lead after now. It may lie in the past when first is large. The result
// keeps now's monotonic clock reading, so deadlines derived from it are
// immune to wall-clock steps during the run.
func alignStart(now time.Time, first, lead, window time.Duration) time.Time {
	if window <= 0 {
		window = time.Second
	}
	earliest := now.Add(lead - first).UnixNano()
	w := window.Nanoseconds()
	t0 := earliest / w * w
	if t0 < earliest {
		t0 += w
	}
	return now.Add(time.Duration(t0 - now.UnixNano()))
}

// traceOffsets converts the trace's times in seconds to offsets from t=0,
// rounded to the nanosecond (0.7 s is 700ms, not 699.999999ms), and adds
// i×stagger to request i.
//
// Why stagger: token buckets and GCRA measure time from an earlier request
// (the one that found the bucket full), so a request that sits exactly on a
// boundary, such as the seed trace's 1.1 s, decides on the difference of two
// network delays, and equal delays are not guaranteed. A lateness that grows
// with the index makes every request later relative to all earlier ones by
// more than the jitter. It must stay small against the slack of the points
// that are not on a boundary: the tightest in the seed trace is the sliding
// window's 1.15 s, request 10, refused until it is 50ms late, which allows
// 50ms/9 ≈ 5.5ms per step; -stagger is capped at 2ms.
func traceOffsets(at []float64, stagger time.Duration) []time.Duration {
	out := make([]time.Duration, len(at))
	for i, s := range at {
		out[i] = secondsToDuration(s) + time.Duration(i)*stagger
	}
	return out
}

// secondsToDuration converts seconds to a duration rounded to the
// nanosecond.
func secondsToDuration(s float64) time.Duration {
	return time.Duration(math.Round(s * 1e9))
}

// waitUntil returns once the clock has reached deadline, never before. It
// sleeps until spinWindow before the deadline, then spins. It returns
// ctx.Err() if ctx ends first.
func waitUntil(ctx context.Context, deadline time.Time) error {
	if d := time.Until(deadline) - spinWindow; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	for time.Now().Before(deadline) {
		// Yield rather than burn: several replays spin at once, possibly
		// on fewer CPUs.
		runtime.Gosched()
	}
	return ctx.Err()
}
