package main

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// shutdown logs a node's stop, three lines at info: why it stops
// ("shutdown: signal received", with the signal; or a binary upgrade, or a
// server that failed), that it drains ("shutdown: draining": the listeners
// stop accepting and the requests in flight finish, gateway/drain.go), and
// that it is done ("shutdown: done", with the drain's duration and the
// exit code), so that an operator reading a node's log tells a clean stop
// from a crash and sees how long the drain took. Safe for concurrent use:
// the first reason given is the one logged.
type shutdown struct {
	log *slog.Logger

	mu     sync.Mutex
	reason string
	since  time.Time // when draining began; zero before
}

func newShutdown(log *slog.Logger) *shutdown { return &shutdown{log: log} }

// because records and logs why the node stops, once: the first call wins.
// A signal is logged as "shutdown: signal received", any other reason as
// "shutdown: " + reason.
func (s *shutdown) because(reason string, attrs ...slog.Attr) {
	s.mu.Lock()
	first := s.reason == ""
	if first {
		s.reason = reason
	}
	s.mu.Unlock()
	if !first {
		return
	}
	msg := "shutdown: " + reason
	if reason == "signal" {
		msg = "shutdown: signal received"
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, msg, append(attrs, slog.Int("pid", os.Getpid()))...)
}

// draining logs the drain's start; handingOver is true on a binary
// upgrade (the new process takes the sockets).
func (s *shutdown) draining(handingOver bool) {
	s.mu.Lock()
	s.since = time.Now()
	reason := s.reason
	s.mu.Unlock()
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "shutdown: draining",
		slog.String("reason", reason), slog.Bool("handing_over", handingOver))
}

// done logs the end of the stop, with the drain's milliseconds (from
// draining, which a stop always calls first) and the exit code.
func (s *shutdown) done(code int) {
	s.mu.Lock()
	since, reason := s.since, s.reason
	s.mu.Unlock()
	var ms float64
	if !since.IsZero() {
		ms = float64(time.Since(since).Microseconds()) / 1000
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "shutdown: done",
		slog.String("reason", reason), slog.Float64("drain_ms", ms), slog.Int("exit_code", code))
}

// signalName is a stop signal's conventional name (SIGTERM, SIGINT),
// which os.Signal's String ("terminated", "interrupt") is not.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case os.Interrupt:
		return "SIGINT"
	}
	return sig.String()
}
