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

	// throughput
	maxConnections = 512
	maxLevels      = 10 // -connections list elements
	maxRepeat      = 10
	maxClients     = 1 << 17 // the addresses of 198.18.0.0/15
	maxWarmup      = 10 * time.Second
	// maxThroughputLoad bounds the load time of a whole throughput run,
	// levels × repetitions × targets × (-warmup + -duration), so a list of
	// levels and -repeat cannot turn a 10-minute -duration into a day.
	maxThroughputLoad = time.Hour
)

// errMismatch is returned (wrapped) by a scenario whose observed decisions
// differ from the expected ones.
var errMismatch = errors.New("decisions differ from the expected ones")

// config is what every scenario gets.
type config struct {
	target    target        // the edge, on loopback unless -allow-remote
	tracePath string        // the seed trace fixture
	duration  time.Duration // the whole run's time budget; also ctx's deadline
	requests  int           // the most requests the run may send
	timeout   time.Duration // per request, connecting included
	stagger   time.Duration // extra lateness per request index in timed replays
	stdout    io.Writer     // the report
	stderr    io.Writer     // warnings

	// throughput only
	compare     target        // a second target measured after the first; zero: none
	connections int           // concurrent clients, one connection each; throughput: levels[0]
	levels      []int         // throughput: the -connections levels, in the order given; at least one
	repeat      int           // throughput: how many times the whole set of levels is run, at least 1
	clients     int           // distinct X-Forwarded-For addresses
	method      string        // request method
	path        string        // request path, query included (cgnat-crowd too)
	warmup      time.Duration // per target, before measuring

	// cgnat-crowd only; connections is also its crowd's pool
	cgnat cgnatParams

	// otp-pumping and otp-guessing only; attacks too
	otp otpParams

	// attacks only
	attacks attackParams

	// credential-stuffing and brute-force only
	login loginParams

	// retry-storm only; clients is its crowd
	storm stormParams

	// queue only; target.metrics is required
	queue queueParams

	// adaptive only; target.metrics is required
	adaptive adaptiveParams

	// plain and mixed only (issue 16): -rate, -api-keys, -attackers;
	// goodput's flood too (-rate)
	gen genParams

	// goodput only (issue 27): -users, -user-rate, -user-connections
	goodput goodputParams
}

// scenario is one kind of traffic.
type scenario struct {
	// run returns an error wrapping errMismatch when the edge's answers
	// were not the expected ones, and any other error when the run could
	// not be completed.
	run func(ctx context.Context, cfg config) error
	// duration and requests, when not zero, replace the defaults of
	// -duration and -requests for this scenario.
	duration time.Duration
	requests int
	// budget, when not nil, returns the whole run's deadline; otherwise it
	// is cfg.duration.
	budget func(cfg config) time.Duration
}

// scenarios returns the scenarios by name.
func scenarios() map[string]scenario {
	return map[string]scenario{
		"cgnat-crowd": {run: runCgnatCrowd},
		"seed-trace":  {run: runSeedTrace},
		"throughput": {
			run:      runThroughput,
			duration: 10 * time.Second,
			requests: maxRequests,
			budget:   throughputBudget,
		},

		"otp-guessing": {run: runOTPGuessing, duration: otpDuration},
		"otp-pumping":  {run: runOTPPumping, duration: otpDuration},

		"attacks": {run: runAttacks, duration: attacksDuration, requests: attacksRequests},

		"credential-stuffing": {run: runCredentialStuffing, duration: loginDuration},
		"brute-force":         {run: runBruteForce, duration: loginDuration},

		"retry-storm": {run: runRetryStorm, duration: stormDuration, requests: stormRequests},

		"queue": {run: runQueue, duration: queueDuration},

		"adaptive": {run: runAdaptive, requests: maxRequests, budget: adaptiveBudget},

		"plain": {run: runPlain, duration: 10 * time.Second, requests: maxRequests, budget: genBudget},
		"mixed": {run: runMixed, duration: 10 * time.Second, requests: maxRequests, budget: genBudget},

		"goodput": {run: runGoodput, duration: 10 * time.Second, requests: maxRequests, budget: goodputBudget},
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
	rawTarget := fs.String("target", "http://127.0.0.1:18080", "base URL of the edge node; loopback only, unless -allow-remote")
	showProgress := fs.Bool("progress", true, "print a progress line each second to stderr on runs whose budget is 10s or more")
	allowRemote := fs.Bool("allow-remote", false, "accept a -target, -compare and their -*-metrics off this machine (a staging node you run); without it they must be loopback")
	tracePath := fs.String("trace", "testdata/fixtures/seed_trace.json", "seed trace fixture (seed-trace)")
	duration := fs.Duration("duration", 30*time.Second, "time budget of the whole run; throughput: measured time per target, per level and repetition, default 10s (at most "+maxDuration.String()+")")
	requests := fs.Int("requests", 10_000, fmt.Sprintf("most requests the run may send; throughput: per level and repetition, split evenly between the targets, default %d (at most %d)", maxRequests, maxRequests))
	timeout := fs.Duration("timeout", 2*time.Second, "per-request timeout (at most "+maxTimeout.String()+")")
	stagger := fs.Duration("stagger", 500*time.Microsecond,
		"timed replays send request i an extra i×stagger late, so jitter cannot make a request early relative to an earlier one (at most "+maxStagger.String()+")")
	rawConnections := fs.String("connections", "32", fmt.Sprintf("throughput: concurrent clients, one connection each, or a comma-separated list of such `levels` (e.g. 32,128,256; at most %d) "+
		"measured in turn and summarised; the summary's peak ratio compares each target's highest rate, its capacity, since at few connections "+
		"a target that waits on a network round trip (an edge on Redis) is bound by latency, rate = connections ÷ latency (Little's law), not by CPU, "+
		"and one level's ratio understates it; cgnat-crowd: the crowd's connections, one number (each at most %d)", maxLevels, maxConnections))
	repeat := fs.Int("repeat", 1, fmt.Sprintf("throughput: run the whole set of -connections levels this many times, interleaved "+
		"(level after level, each level's target then compare), and summarise the medians per level (at most %d)", maxRepeat))
	clients := fs.Int("clients", 1000, fmt.Sprintf("throughput, retry-storm (at most 5000): distinct X-Forwarded-For addresses from 198.18.0.0/15, in turn (at most %d)", maxClients))
	method := fs.String("method", "GET", "throughput, plain: request method")
	path := fs.String("path", "/api/bench", "throughput, plain, cgnat-crowd: request path, query allowed (cgnat-crowd: a path the visitor rule limits)")
	rawCompare := fs.String("compare", "", "throughput: base URL of a second target (e.g. the origin) measured right after -target; loopback only")
	rawTargetMetrics := fs.String("target-metrics", "", "throughput: URL of -target's Prometheus metrics, its admin listener's /metrics (e.g. http://127.0.0.1:19901/metrics), "+
		"scraped as each run's warm-up ends and after its last answer to count the rule decisions its store made and its on_store_error fallbacks; "+
		"levels with fallbacks are left out of the peak; loopback only")
	rawCompareMetrics := fs.String("compare-metrics", "", "throughput: the same as -target-metrics, for -compare")
	warmup := fs.Duration("warmup", time.Second, "throughput: unmeasured load per target, per level and repetition, before measuring; plain, mixed, goodput: before the window (at most "+maxWarmup.String()+")")
	cg := defaultCgnatParams
	fs.IntVar(&cg.visitors, "visitors", cg.visitors, fmt.Sprintf("cgnat-crowd: visitors behind the one address (at most %d)", maxVisitors))
	fs.Float64Var(&cg.share, "visitor-share", cg.share, "cgnat-crowd: share of -limit each visitor sends in the period, (0, 1]")
	fs.Int64Var(&cg.limit, "limit", cg.limit, "cgnat-crowd: the policy's per-visitor limit (and burst) per -period on -path")
	fs.DurationVar(&cg.period, "period", cg.period, "cgnat-crowd: the policy's period for -limit and -ip-ceiling; the load lasts one (at most "+maxCgnatPeriod.String()+")")
	fs.Int64Var(&cg.ipCeiling, "ip-ceiling", cg.ipCeiling, "cgnat-crowd: the policy's ip_ceiling")
	fs.Int64Var(&cg.mintLimit, "mint-limit", cg.mintLimit, "cgnat-crowd: the policy's visitor mint_limit")
	fs.DurationVar(&cg.mintPeriod, "mint-period", cg.mintPeriod, "cgnat-crowd: the policy's visitor mint_period")
	fs.IntVar(&cg.attacks, "attacker-requests", cg.attacks, fmt.Sprintf("cgnat-crowd: requests the cookie-cycling attacker sends over the period (at most %d)", maxAttackRequests))
	fs.StringVar(&cg.cookie, "cookie", cg.cookie, "cgnat-crowd: the policy's visitor cookie name")
	op := defaultOTPParams
	op.register(fs)
	at := defaultAttackParams
	at.register(fs)
	lp := defaultLoginParams
	lp.register(fs)
	gp := defaultGenParams
	gp.register(fs)
	gd := defaultGoodputParams
	gd.register(fs)
	var sp stormParams
	fs.DurationVar(&sp.period, "storm-window", 4*time.Second, "retry-storm: the fixed window of the policy's /storm/* rules (loadtest/testdata/retry-storm.hcl), whole seconds")
	qp := defaultQueueParams
	fs.StringVar(&qp.origin, "queue-origin", qp.origin, "queue: listen address of the scenario's recording origin, the edge's upstream (loadtest/testdata/queue.hcl); loopback only")
	fs.IntVar(&qp.rate, "queue-rate", qp.rate, "queue: the queue = true rule's rate, per second")
	fs.IntVar(&qp.burst, "queue-burst", qp.burst, "queue: the rule's burst; the scenario sends one more")
	ap := defaultAdaptiveParams
	ap.register(fs)
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
	sc, ok := scenarios()[*name]
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if ok && sc.duration != 0 && !set["duration"] {
		*duration = sc.duration
	}
	if ok && sc.requests != 0 && !set["requests"] {
		*requests = sc.requests
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
	case *repeat < 1 || *repeat > maxRepeat:
		return usage("-repeat must be in [1, %d], got %d", maxRepeat, *repeat)
	case *clients < 1 || *clients > maxClients:
		return usage("-clients must be in [1, %d], got %d", maxClients, *clients)
	case !validMethod(*method):
		return usage("-method %q is not an HTTP method token", *method)
	case !validPath(*path):
		return usage("-path %q: want an origin-form path such as /api/bench, printable ASCII, no spaces", *path)
	case *warmup < 0 || *warmup > maxWarmup:
		return usage("-warmup must be in [0, %v], got %v", maxWarmup, *warmup)
	}
	levels, err := parseLevels(*rawConnections)
	if err != nil {
		return usage("%v", err)
	}
	if *name != "throughput" && (len(levels) > 1 || *repeat > 1) {
		// Only throughput measures levels; anywhere else a list or
		// repetitions would be silently cut to one.
		return usage("a list of -connections and -repeat are for -scenario throughput only")
	}
	if err := cg.check(); err != nil {
		return usage("%v", err)
	}
	if err := op.check(); err != nil {
		return usage("%v", err)
	}
	if err := at.check(); err != nil {
		return usage("%v", err)
	}
	if err := lp.check(); err != nil {
		return usage("%v", err)
	}
	if err := qp.check(); err != nil {
		return usage("%v", err)
	}
	if err := ap.check(); err != nil {
		return usage("%v", err)
	}
	if err := gp.check(); err != nil {
		return usage("%v", err)
	}
	if err := gd.check(); err != nil {
		return usage("%v", err)
	}
	at.originSet = set["origin"]
	if !ok {
		return usage("unknown scenario %q (have %s)", *name, strings.Join(names, ", "))
	}
	tg, err := parseRemoteTarget("-target", *rawTarget, *allowRemote)
	if err != nil {
		return usage("%v", err)
	}
	var cmp target
	if *rawCompare != "" {
		if cmp, err = parseRemoteTarget("-compare", *rawCompare, *allowRemote); err != nil {
			return usage("%v", err)
		}
	}
	if *rawCompareMetrics != "" && *name != "throughput" || *rawTargetMetrics != "" && *name != "throughput" && *name != "queue" && *name != "adaptive" {
		return usage("-target-metrics and -compare-metrics are for -scenario throughput only (and -target-metrics for queue and adaptive)")
	}
	if *rawTargetMetrics != "" {
		if tg.metrics, err = parseRemoteMetricsURL("-target-metrics", *rawTargetMetrics, *allowRemote); err != nil {
			return usage("%v", err)
		}
	}
	if *rawCompareMetrics != "" {
		if *rawCompare == "" {
			return usage("-compare-metrics needs -compare")
		}
		if cmp.metrics, err = parseRemoteMetricsURL("-compare-metrics", *rawCompareMetrics, *allowRemote); err != nil {
			return usage("%v", err)
		}
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

		compare:     cmp,
		connections: levels[0],
		levels:      levels,
		repeat:      *repeat,
		clients:     *clients,
		method:      *method,
		path:        *path,
		warmup:      *warmup,

		cgnat:   cg,
		otp:     op,
		attacks: at,
		login:   lp,
		storm:   sp,
		queue:   qp,
		gen:     gp,
		goodput: gd,

		adaptive: ap,
	}
	budget := cfg.duration
	if sc.budget != nil {
		budget = sc.budget(cfg)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if *showProgress && budget >= progressFrom {
		// The scenario's warnings and the progress lines share stderr.
		lw := &syncWriter{w: stderr}
		stderr, cfg.stderr = lw, lw
		start := time.Now() // before the ticker: its first tick reads 1s
		tick := time.NewTicker(time.Second)
		done := make(chan struct{})
		stopped := make(chan struct{})
		go func() { defer close(stopped); progress(done, tick.C, start, budget, *name, lw) }()
		defer func() { tick.Stop(); close(done); <-stopped }()
	}
	switch err := sc.run(ctx, cfg); {
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
