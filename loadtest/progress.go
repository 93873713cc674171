package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressFrom is the shortest run budget that reports progress: a run of
// 10 s or more prints a line each second to stderr, so an operator at a
// long run sees that it is alive and how far it is; a shorter run (the
// seed trace, most tests) prints nothing more than its report.
const progressFrom = 10 * time.Second

// progress writes one line to w for each tick of ticks until done is
// closed: "loadtest: NAME: 12s of 1m0s, 48s left", the time since start
// (by the tick's own time, so a test drives it with a channel of its own)
// out of the run's budget, rounded down to the second. It stops at done;
// stderr is its only writer while it runs (the report goes to stdout).
func progress(done <-chan struct{}, ticks <-chan time.Time, start time.Time, budget time.Duration, name string, w io.Writer) {
	for {
		select {
		case <-done:
			return
		case now := <-ticks:
			el := now.Sub(start).Truncate(time.Second)
			if el < 0 {
				el = 0
			}
			left := max(budget-el, 0)
			fmt.Fprintf(w, "loadtest: %s: %v of %v, %v left\n", name, el, budget, left)
		}
	}
}

// syncWriter serialises writes to w, which the progress goroutine and the
// scenario share.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
