package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"
)

// Exit statuses.
const (
	exitOK       = 0
	exitMismatch = 1 // the edge decided otherwise than expected
	exitError    = 2 // usage, fixture or connection error
)

// Bounds on the flags, so a run always stops by itself.
const (
	maxDuration = 10 * time.Minute
	maxRequests = 10_000_000
	maxTimeout  = 30 * time.Second
	maxStagger  = 2 * time.Millisecond
)

// errMismatch is returned (wrapped) by a scenario whose observed decisions
// differ from the expected ones.
var errMismatch = errors.New("decisions differ from the expected ones")

// config is what every scenario gets.
type config struct {
	target    target        // the edge, always on loopback
	tracePath string        // the seed trace fixture
	duration  time.Duration // the whole run's time budget; also ctx's deadline
	requests  int           // the most requests the run may send
	timeout   time.Duration // per request, connecting included
	stagger   time.Duration // extra lateness per request index in timed replays
	stdout    io.Writer     // the report
	stderr    io.Writer     // warnings
}

// scenario runs one kind of traffic. It returns an error wrapping
// errMismatch when the edge's answers were not the expected ones, and any
// other error when the run could not be completed.
type scenario func(ctx context.Context, cfg config) error

// scenarios returns the scenarios by name.
func scenarios() map[string]scenario {
	return map[string]scenario{
		"seed-trace": runSeedTrace,
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, runs the chosen scenario and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	names := slices.Sorted(maps.Keys(scenarios()))

	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("scenario", "seed-trace", "scenario to run: "+strings.Join(names, ", "))
	rawTarget := fs.String("target", "http://127.0.0.1:18080", "base URL of the edge node; loopback only")
	tracePath := fs.String("trace", "testdata/fixtures/seed_trace.json", "seed trace fixture (seed-trace)")
	duration := fs.Duration("duration", 30*time.Second, "time budget of the whole run (at most "+maxDuration.String()+")")
	requests := fs.Int("requests", 10_000, fmt.Sprintf("most requests the run may send (at most %d)", maxRequests))
	timeout := fs.Duration("timeout", 2*time.Second, "per-request timeout (at most "+maxTimeout.String()+")")
	stagger := fs.Duration("stagger", 500*time.Microsecond,
		"timed replays send request i an extra i×stagger late, so jitter cannot make a request early relative to an earlier one (at most "+maxStagger.String()+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./loadtest [flags]\n\nscenarios: %s\n\nflags:\n", strings.Join(names, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}

	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "loadtest: "+format+"\n", a...)
		return exitError
	}
	switch {
	case fs.NArg() > 0:
		return usage("unexpected arguments %q", fs.Args())
	case *duration <= 0 || *duration > maxDuration:
		return usage("-duration must be in (0, %v], got %v", maxDuration, *duration)
	case *requests <= 0 || *requests > maxRequests:
		return usage("-requests must be in [1, %d], got %d", maxRequests, *requests)
	case *timeout <= 0 || *timeout > maxTimeout:
		return usage("-timeout must be in (0, %v], got %v", maxTimeout, *timeout)
	case *stagger < 0 || *stagger > maxStagger:
		return usage("-stagger must be in [0, %v], got %v", maxStagger, *stagger)
	}
	sc, ok := scenarios()[*name]
	if !ok {
		return usage("unknown scenario %q (have %s)", *name, strings.Join(names, ", "))
	}
	tg, err := parseTarget(*rawTarget)
	if err != nil {
		return usage("%v", err)
	}

	cfg := config{
		target:    tg,
		tracePath: *tracePath,
		duration:  *duration,
		requests:  *requests,
		timeout:   *timeout,
		stagger:   *stagger,
		stdout:    stdout,
		stderr:    stderr,
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	switch err := sc(ctx, cfg); {
	case err == nil:
		return exitOK
	case errors.Is(err, errMismatch):
		fmt.Fprintf(stderr, "loadtest: %s: %v\n", *name, err)
		return exitMismatch
	default:
		fmt.Fprintf(stderr, "loadtest: %s: %v\n", *name, err)
		return exitError
	}
}
