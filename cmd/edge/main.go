// Command edge is the edge security gateway: a reverse proxy that refuses
// abusive requests to login, signup and OTP endpoints before the origin
// spends anything on them.
//
//	edge [serve] [-config policies.hcl] [-listen ADDR] [-admin ADDR] [-store memory] [-dry-run] [-demo]
//	edge validate [-json] [-config policies.hcl]
//	edge dry-run on|off [-rule NAME] [-for 30m] -reason TEXT [-admin ADDR]
//	edge forgive [-account A] [-ip IP] [-phone P] [-visitor COOKIE -visitor-ip IP] [-key NAME=VALUE]... [-rule NAME] [-for 1h] -reason TEXT [-admin ADDR]
//	edge explain [-admin ADDR] [-method M] [-path P] [-host H] -from IP [-header 'K: V']... [-json '{...}']
//	edge test [-config policies.hcl]
//	edge fmt [-w] [-l] [FILE...]
//	edge reload [-admin ADDR]
//	edge demo-origin [-listen ADDR]
//	edge health [-admin ADDR | -config policies.hcl] [-strict | -live] [-timeout 2s]
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/nodestore"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/leasestore"
	"github.com/edge-gateway/edge/rules/memstore"
	"github.com/edge-gateway/edge/rules/redisstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, for tests: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) == 1 && (args[0] == "--help" || args[0] == "-help" || args[0] == "-h") {
		cmd = "help"
	}
	switch cmd {
	case "serve":
		return serve(args, stderr)
	case "explain":
		return explainCmd(args, stdout, stderr)
	case "dry-run":
		return dryRunCmd(args, stdout, stderr)
	case "forgive":
		return forgiveCmd(args, stdout, stderr)
	case "validate":
		return validate(args, stdout, stderr)
	case "reload":
		return reloadCmd(args, stdout, stderr)
	case "test":
		return test(args, stdout, stderr)
	case "fmt":
		return fmtCmd(args, stdout, stderr)
	case "demo-origin":
		return demoOrigin(args, stderr)
	case "version":
		return version(stdout)
	case "health":
		return healthCmd(args, stdout, stderr)
	case "key-format":
		return keyFormatCmd(args, stdout, stderr)
	case "help", "-h", "-help", "--help":
		return usage(stdout)
	}
	fmt.Fprintf(stderr, "edge: unknown command %q (want serve, validate, test, fmt, reload, dry-run, forgive, explain, demo-origin, health, key-format or version)\n", cmd)
	return 2
}

// flagExit is a subcommand's exit status for a flag-parsing error: 0 for
// -h, -help or --help (the usage was asked for and printed), 2 otherwise
// (the flag package printed what was wrong).
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// printDiags writes one line per diagnostic in hcl's Diagnostic.Error()
// form, FILE:LINE,COL-COL: Summary; Detail, which editors and CI parse.
func printDiags(w io.Writer, file string, diags hcl.Diagnostics) {
	for _, d := range diags {
		prefix := ""
		if d.Severity == hcl.DiagWarning {
			prefix = "warning: "
		}
		if d.Subject == nil {
			// No position (the file could not be read): name the file.
			fmt.Fprintf(w, "%s%s: %s; %s\n", prefix, file, d.Summary, d.Detail)
			continue
		}
		fmt.Fprintf(w, "%s%s\n", prefix, d.Error())
	}
}

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "policies.hcl", "policy file to check")
	asJSON := fs.Bool("json", false, "print the diagnostics as one JSON array on stdout (docs/policy.md), instead of lines on stderr")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		*config = fs.Arg(0)
	}
	p, diags := builtin.LoadFile(*config)
	// The test blocks' own errors come in the same run as the policy's;
	// the rules they name are checked once the policy compiles.
	_, td := parseTests(*config, p)
	diags = append(diags, td...)
	sortDiags(diags)
	var secret string // a warning about the environment, not the file
	if !diags.HasErrors() && node.Of(p).Store.Kind == "redis" {
		// The secret belongs to the deployment, not the file: validate
		// warns about a short one in its environment, and serve refuses it.
		if n := len(os.Getenv(node.Of(p).KeySecretEnv)); n > 0 && n < minRedisKeySecret {
			secret = shortSecretError(node.Of(p).KeySecretEnv, n).Error()
		}
	}
	if *asJSON {
		if secret != "" {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Short key secret", Detail: secret})
		}
		if err := writeJSONDiags(stdout, *config, diags); err != nil {
			fmt.Fprintln(stderr, "edge validate:", err)
			return 1
		}
		if diags.HasErrors() {
			return 1
		}
		return 0
	}
	printDiags(stderr, *config, diags)
	if diags.HasErrors() {
		return 1
	}
	if secret != "" {
		fmt.Fprintf(stderr, "warning: %s: %s\n", *config, secret)
	}
	fmt.Fprintf(stdout, "%s: valid, %d rules\n", *config, len(p.Rules))
	return 0
}

// minRedisKeySecret is the shortest key secret a Redis-backed node accepts,
// in bytes of the variable's value, used as given (no hex or base64
// decoding): 32 bytes, the output length of HMAC-SHA256 (RFC 2104 §3:
// keys shorter than it are strongly discouraged).
const minRedisKeySecret = 32

// shortSecretError says why a key secret of n bytes in $env is refused with
// a Redis store.
func shortSecretError(env string, n int) error {
	return fmt.Errorf("the redis store needs a key secret of at least %d bytes in $%s (it has %d): keys in Redis are keyed hashes of phone numbers, accounts and IPs, and a short secret lets whoever reads Redis recover them by trying every secret; make one with `openssl rand -hex 32`", minRedisKeySecret, env, n)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("invalid -log-level %q", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: edge [serve] [flags]   (also: edge validate -h, edge demo-origin -h)\n\nflags of serve:\n")
		fs.PrintDefaults()
	}
	config := fs.String("config", "policies.hcl", "policy file")
	listen := fs.String("listen", "", "public listener HOST:PORT (overrides the policy's listen)")
	admin := fs.String("admin", "", "admin listener HOST:PORT (overrides the policy's admin_listen)")
	store := fs.String("store", "", "counter store: memory, redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+cluster://H:P,H:P or redis+sentinel://MASTER@H:P,H:P (overrides the policy's store url; its TLS files and password_env still apply)")
	dryRun := fs.Bool("dry-run", false, "evaluate every rule, log and count would-be refusals, refuse nothing")
	withDemo := fs.Bool("demo", false, "also run the built-in demo origin on the policy's upstream address")
	upstream := fs.String("upstream", "", "origin http://HOST:PORT or https://HOST:PORT (overrides the policy's upstream; an https:// one uses the policy's upstream_tls, if any)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (go tool pprof) to this file until the node stops")
	rotateKey := fs.Bool("rotate-key-secret", false, "start with a key secret other than the one Redis's counters are keyed under, resetting every counter; to rotate without a reset, give the old secret in $EDGE_KEY_SECRET_PREVIOUS instead (docs/operations.md, \"Rotating the key secret\")")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "edge:", err)
		return 2
	}
	// Binary upgrades and systemd (upgrade.go, sdnotify.go): SIGUSR2 is
	// caught from the start (its default action kills), and a process
	// started by an upgrade reads what the old one handed over.
	usr2 := make(chan os.Signal, 1)
	notifyUpgrade(usr2)
	defer signal.Stop(usr2)
	listeners.setLogger(log)
	sd := newNotifier()
	inh, err := inherit(log)
	if err != nil {
		fmt.Fprintln(stderr, "edge: binary upgrade:", err)
		return 1
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "edge: -cpuprofile:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			fmt.Fprintln(stderr, "edge: -cpuprofile:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	p, diags := builtin.LoadFile(*config)
	printDiags(stderr, *config, diags)
	if diags.HasErrors() {
		fmt.Fprintf(stderr, "edge: %s has errors; not starting\n", *config)
		return 1
	}
	nc := node.Of(p)
	secret := []byte(os.Getenv(nc.KeySecretEnv))
	prevSecret := []byte(os.Getenv(previousSecretEnv(nc.KeySecretEnv)))
	if len(prevSecret) > 0 && (len(secret) == 0 || string(prevSecret) == string(secret)) {
		fmt.Fprintf(stderr, "edge: $%s is set: a key secret rotation needs the new secret in $%s, other than the previous one (docs/operations.md, \"Rotating the key secret\")\n", previousSecretEnv(nc.KeySecretEnv), nc.KeySecretEnv)
		return 1
	}
	st, fc, rs, err := openStore(p, *store, len(secret), log)
	if err != nil {
		fmt.Fprintln(stderr, "edge:", err)
		return 1
	}
	stored := &runningStore{flag: *store, cfg: nc.Store, fc: fc}
	defer st.Close()
	var keyFormats rules.KeyFormats // the memory store's: format 2
	if rs != nil {
		kf, err := checkKeySecrets(rs, secret, prevSecret, nc.KeySecretEnv, *rotateKey, p.LongestKeyLifetime(), time.Now(), log)
		if err != nil {
			fmt.Fprintln(stderr, "edge:", err)
			return 1
		}
		keyFormats = kf
	} else if inh != nil {
		// The memory store restores the old process's counters, hashed in
		// its format: keep them found.
		keyFormats = inh.memoryKeyFormats(time.Now(), p.LongestKeyLifetime())
	}
	if rs == nil && len(prevSecret) > 0 {
		// The memory store's counters were keyed under the previous secret
		// (handed over by a binary upgrade): read them under it too for
		// the policy's longest key lifetime, or to the end of the window
		// the old process was in.
		until := time.Now().Add(p.LongestKeyLifetime() + time.Minute)
		if until.After(keyFormats.RotateUntil) {
			keyFormats.RotateUntil = until
		}
		log.Warn("key secret rotation: counters are read under the previous secret too until the window ends (the policy's longest key lifetime and a minute); drop $"+previousSecretEnv(nc.KeySecretEnv)+" after it", "until", keyFormats.RotateUntil.UTC().Format(time.RFC3339), "longest_key_lifetime", p.LongestKeyLifetime().String())
	}
	switch {
	case len(secret) == 0 && inh.handedKeySecret() != nil:
		secret = inh.handedKeySecret()
		log.Warn("key secret not set: using the random one the previous process handed over on the binary upgrade; counter keys and visitor hashes change at the next restart", "env", nc.KeySecretEnv)
	case len(secret) == 0:
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
		log.Warn("key secret not set: using a random one; counter keys and visitor hashes change at every restart (set it for a fleet: a Redis-backed node refuses to start without it)", "env", nc.KeySecretEnv)
	case len(secret) < minRedisKeySecret:
		// The memory store keeps its keys in this process; a Redis store
		// refuses such a secret (openStore).
		log.Warn("key secret shorter than 32 bytes: key hashes in the logs can be reversed by trying secrets, and a Redis-backed node refuses it", "env", nc.KeySecretEnv, "bytes", len(secret))
	}
	health, fleet, collectors := storeSeams(st, fc, rs)

	// SIGTERM and SIGINT stop the node: the listeners stop accepting, the
	// requests in flight finish (gateway/drain.go), then it exits. The log
	// says why it stops, that it drains and when it is done (shutdown).
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	down := newShutdown(log)
	term := make(chan os.Signal, 1)
	signal.Notify(term, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(term)
	go func() {
		select {
		case sig := <-term:
			down.because("signal", slog.String("signal", signalName(sig)))
			stop()
		case <-ctx.Done():
		}
	}()
	var rl *reloader // SIGHUP, the file's changes and POST /admin/reload all reload through it
	visitorSecret := visitorSecretFor(inh)
	srv, err := gateway.New(gateway.Options{
		Policy: p, Store: st, KeySecret: secret, PreviousKeySecret: prevSecret, DryRun: *dryRun,
		Listen: *listen, AdminListen: *admin, Upstream: *upstream, Logger: log,
		Health: health, Collectors: collectors, Fleet: fleet,
		Extensions: builtin.ExtensionsWith(builtin.ExtensionOptions{VisitorSecret: visitorSecret}),
		AdminToken: os.Getenv("EDGE_ADMIN_TOKEN"),
		Reload:     func() gateway.ReloadResult { return rl.reload("admin") },
	})
	if err != nil {
		fmt.Fprintln(stderr, "edge:", err)
		return 1
	}
	srv.Engine().SetKeyFormats(keyFormats) // before any request (docs/deploying.md, "Key format and rolling upgrades")
	if rs != nil {
		tick := time.NewTicker(keyFormatPoll)
		defer tick.Stop()
		go watchKeyFormat(ctx, rs, srv.Engine(), keyFingerprint(secret), time.Now, tick.C, log)
		epochTick := time.NewTicker(nodestore.EpochPoll)
		defer epochTick.Stop()
		ew := nodestore.EpochWatch{Redis: rs, Store: fc, Grace: func() time.Duration { return node.Of(srv.Policy()).Store.ResetGrace }, Now: time.Now, Log: log}
		go ew.Watch(ctx, epochTick.C)
	}
	rl = newReloader(ctx, srv, *config, startSettings{
		listen: srv.ListenAddr(), adminListen: srv.AdminAddr(), listenFlag: *listen != "", adminFlag: *admin != "",
		upstreamFlag: *upstream, maxBodyBytes: nc.MaxBodyBytes, keySecretEnv: nc.KeySecretEnv, decideListen: p.DecideListen,
	}, stored, log, stderr)
	rl.sd = sd
	upg := newUpgrader(log, sd, append([]string{"serve"}, args...), handedState{keySecret: secret, visitorSecret: visitorSecret, formats: srv.Engine().KeyFormats}, memoryStore(st))
	if _, err := rl.watch(ctx); err != nil {
		log.Warn("not reloading on changes of the policy file (SIGHUP and POST /admin/reload still do)", "policy", *config, "error", err.Error())
	}
	errc := make(chan error, 4)
	running := 0

	if *withDemo {
		up := nc.Upstream
		if *upstream != "" {
			up = *upstream
		}
		u, err := url.Parse(up)
		if err != nil {
			fmt.Fprintln(stderr, "edge: upstream:", err)
			return 1
		}
		if u.Scheme != "http" {
			fmt.Fprintf(stderr, "edge: -demo serves plain HTTP; the upstream is %s\n", up)
			return 1
		}
		ln, err := openListener("demo", u.Host) // handed over on an upgrade too
		if err != nil {
			fmt.Fprintln(stderr, "edge: demo origin:", err)
			return 1
		}
		running++
		go func() { errc <- demo.New().Serve(ctx, ln) }()
		log.Info("demo origin listening", "addr", ln.Addr().String())
	}
	aln, err := openListener("admin", srv.AdminAddr())
	if err != nil {
		fmt.Fprintln(stderr, "edge: admin listener:", err)
		return 1
	}
	ln, err := openListener("public", srv.ListenAddr())
	if err != nil {
		fmt.Fprintln(stderr, "edge: listener:", err)
		return 1
	}
	var dln net.Listener
	if p.DecideListen != "" {
		// The decision-only listener (docs/deploying.md, "Decision-only
		// mode"): opened at start, like the others.
		if dln, err = openListener("decide", p.DecideListen); err != nil {
			fmt.Fprintln(stderr, "edge: decide listener:", err)
			return 1
		}
	}
	if inh != nil {
		// Every listener is open: the old process may stop accepting. Its
		// counters come over before this one accepts (upgrade.go).
		if err := inh.takeOver(memoryStore(st), secret); err != nil {
			fmt.Fprintln(stderr, "edge: binary upgrade:", err)
			return 1
		}
	}
	running += 2
	go func() { errc <- srv.ServeAdmin(ctx, aln) }()
	go func() { errc <- srv.Serve(ctx, ln) }()
	if dln != nil {
		running++
		go func() { errc <- srv.ServeDecide(ctx, dln) }()
		log.Info("decision-only listener", "addr", dln.Addr().String())
	}
	log.Info("edge listening", "addr", ln.Addr().String(), "admin", aln.Addr().String(),
		"policy", *config, "rules", len(p.Rules), "dry_run", *dryRun || p.DryRun, "store", storeName(nc.Store, *store), "pid", os.Getpid(), "tls", srv.ServesTLS())
	if names := listeners.unclaimed(); len(names) > 0 {
		log.Warn("inherited sockets no listener uses were closed", "sockets", names)
	}
	if inh != nil {
		inh.serving()
	}
	if err := sd.ready(); err != nil {
		log.Warn("could not tell systemd the node is ready", "error", err.Error())
	}
	// STOPPING=1 goes as the drain begins; the node waits for it before it
	// exits, or a busy machine could end the process first and systemd
	// would never hear it.
	told := make(chan struct{})
	go func() {
		defer close(told)
		<-ctx.Done()
		down.draining(upg.handingOver())
		if !upg.handingOver() {
			_ = sd.stopping()
		}
	}()

	// SIGHUP reloads the policy; a broken one is refused and the running
	// policy stays.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	code := 0
	for running > 0 {
		select {
		case <-hup:
			rl.reload("signal")
		case <-usr2:
			upg.start()
		case ev := <-upg.Events():
			if ev.err != nil {
				log.Error("binary upgrade failed: still serving", "pid", ev.pid, "error", ev.err.Error())
				continue
			}
			upg.stopServing(ev.pid)
			down.because("binary upgrade", slog.Int("pid", ev.pid))
			stop() // every server drains and returns
		case err := <-errc:
			running--
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Error("server stopped", "error", err)
				down.because("server stopped", slog.String("error", err.Error()))
				code = 1
			}
			stop()
		}
	}
	stop()
	<-told
	if upg.handingOver() {
		code = upg.handOver()
	}
	down.done(code)
	return code
}

// breakerSpanBudgets is how many store budgets a run of failed calls must
// last before it opens the breaker: as long as a coalesced call may wait,
// past its budget, for a store that is answering on a node short of CPU
// (redisstore's overload bound, 20 budgets: its package doc, "Failures and
// the time budget"). Every call of the run still fails by its own
// on_store_error within its budget; the span only delays failing fast, by
// 100ms at the default 5ms budget, when Redis is really gone.
const breakerSpanBudgets = 20

// storeSeams is what the gateway reads of the store beside rules.Store:
// the failure-handling store's health and metrics (fc: nil with none), the
// budget leases' metrics when st leases (leasestore) and, with Redis (rs:
// nil without), its client's metrics and the fleet's shared hashes. An
// interface is set only with a store under it, never to a typed nil.
func storeSeams(st rules.Store, fc *failclosed.Store, rs *redisstore.Store) (health gateway.Health, fleet gateway.Fleet, collectors []prometheus.Collector) {
	if fc != nil {
		health = fc
		collectors = nodestore.StoreMetrics(fc)
	}
	if ls, ok := st.(*leasestore.Store); ok {
		collectors = append(collectors, nodestore.LeaseMetrics(ls.Stats)...)
	}
	if rs != nil {
		fleet = rs
		collectors = append(collectors, nodestore.RedisMetrics(rs.Stats)...)
	}
	return health, fleet, collectors
}

// openStore opens the counter store the policy (or the -store flag) names.
// A Redis store is wrapped in failclosed (time budget, breaker, each rule's
// on_store_error), that in leasestore (the rules' budget_lease { }: a hot
// counter's units spent on this node, taken many at a time), and needs the key secret, secretLen bytes long, to be set
// (a fleet must share one key space: docs/host-and-path.md §7) and at
// least minRedisKeySecret bytes long (Redis holds the keyed hashes). The memory
// store never fails and is used as is (its decisions are local already:
// nothing is leased). fc is the failclosed wrapper and rs the Redis store
// inside it, both nil for memory; closing st closes everything.
func openStore(p *rules.Policy, flagStore string, secretLen int, log *slog.Logger) (st rules.Store, fc *failclosed.Store, rs *redisstore.Store, err error) {
	sc := node.Of(p).Store
	kind, url := sc.Kind, sc.URL
	switch {
	case flagStore == "memory":
		kind, url = "memory", ""
	case flagStore != "":
		if err := node.ValidateStoreURL(flagStore); err != nil {
			return nil, nil, nil, fmt.Errorf("-store: %w", err)
		}
		kind, url = "redis", flagStore
	}
	if kind == "memory" {
		// The rules' key budgets (their max_keys, or shares of the store's)
		// travel in their ops; MaxKeys bounds ops without one.
		ms, err := memstore.New(memstore.Options{MaxKeys: sc.MaxKeys})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("creating memory store: %w", err)
		}
		return ms, nil, nil, nil
	}
	if secretLen == 0 {
		return nil, nil, nil, fmt.Errorf("the redis store needs the key secret in $%s: a fleet must share one key space, so a random secret cannot do", node.Of(p).KeySecretEnv)
	}
	if secretLen < minRedisKeySecret {
		return nil, nil, nil, shortSecretError(node.Of(p).KeySecretEnv, secretLen)
	}
	if log != nil {
		redisstore.SetLogger(log)
	}
	opts, err := redisOptions(sc, url)
	if err != nil {
		return nil, nil, nil, err
	}
	rs, err = redisstore.New(opts)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating redis store: %w", err)
	}
	// The breaker opens on failures lasting breakerSpanBudgets budgets (and
	// on silence, when the store counts its replies: failclosed.Liveness).
	// One coalesced round trip that fails, failing all its calls at once,
	// or replies a saturated node read late, cost those calls, each by its
	// on_store_error within its budget, not a cooldown of every call: an
	// open breaker answers everything by on_store_error, so a flood that
	// saturates the node must not be able to open it (docs/attacks.md,
	// "Saturation fail-open"). An idle node pings Redis every second, so
	// that /readyz knows.
	budget := sc.Timeout
	if budget == 0 {
		budget = redisstore.DefaultTimeout
	}
	fc, err = failclosed.New(rs, failclosed.Options{
		FleetSize: sc.FleetSize, FailureSpan: breakerSpanBudgets * budget, HealthInterval: time.Second, Logger: log,
		// A refusal (WRONGPASS, NOAUTH, NOPERM) is a configuration error:
		// the node is not ready while it lasts (gateway.Health.Refused).
		Refusal: redisstore.IsAuthError,
	})
	if err != nil {
		rs.Close()
		return nil, nil, nil, fmt.Errorf("creating failclosed store: %w", err)
	}
	// Check Redis now: dial (TLS handshake, sentinel lookup), authenticate,
	// load the script and open the flushers' connections, so the first
	// requests pay for none of it; /readyz?strict=1 is 503 until a check
	// has succeeded (failclosed.Check opens the breaker on a failure). A
	// Redis that is down at start does not stop the node: it serves
	// degraded from its first request, each rule by its on_store_error,
	// /readyz says so, and the breaker finds Redis back. A Redis that
	// refuses us (a wrong password, an ACL) does not stop it either, but
	// /readyz answers 503 until it accepts us when rules fail closed:
	// every login would be refused.
	pctx, cancel := context.WithTimeout(context.Background(), time.Second+opts.DialTimeout)
	if err := fc.Check(pctx); err != nil && log != nil {
		level, msg := slog.LevelWarn, "redis unreachable at start: serving degraded until it answers"
		if redisstore.IsAuthError(err) {
			level, msg = slog.LevelError, "redis refused the edge's credentials at start (check the url's user, password_env and the ACL): not ready, and rules that fail closed answer 503, until it accepts them"
		}
		log.Log(pctx, level, msg, "store", node.RedactURL(url), "error", err.Error())
	} else if log != nil {
		checkEviction(pctx, rs, log)
		checkFailoverLoss(pctx, rs, log)
	}
	cancel()
	return leasestore.New(fc, leasestore.Options{}), fc, rs, nil
}

// redisOptions are the Redis store's options for url (the policy's, or the
// -store flag's, which replaces the url only): the budget, the dial
// budget, the TLS files when url is rediss:// or rediss+sentinel://, and
// the passwords from the variables password_env and sentinel_password_env
// name, which must then be set (docs/deploying.md, "Redis over TLS, ACLs
// and Sentinel").
func redisOptions(sc node.StoreConfig, url string) (redisstore.Options, error) {
	opts := redisstore.Options{URL: url, Timeout: sc.Timeout, DialTimeout: sc.DialTimeout, SentinelUsername: sc.SentinelUsername}
	tlsURL := func(u string) bool {
		return strings.HasPrefix(u, "rediss://") || strings.HasPrefix(u, "rediss+sentinel://")
	}
	if !tlsURL(url) && (tlsURL(sc.URL) || sc.CAFile != "" || sc.CertFile != "" || sc.KeyFile != "" || sc.ServerName != "") {
		// A -store override must not turn the block's TLS off: the
		// password and every keyed hash would cross the network in the
		// clear, with nothing said.
		return opts, fmt.Errorf("-store %s is not TLS, but the policy's store block is (url %s, its TLS files): the store's password and keys would go in the clear; give a rediss:// or rediss+sentinel:// URL", node.RedactURL(url), node.RedactURL(sc.URL))
	}
	if tlsURL(url) {
		opts.TLS = redisstore.TLS{CAFile: sc.CAFile, CertFile: sc.CertFile, KeyFile: sc.KeyFile, ServerName: sc.ServerName}
	}
	for _, e := range []struct {
		env, attr string
		dst       *string
	}{{sc.PasswordEnv, "password_env", &opts.Password}, {sc.SentinelPasswordEnv, "sentinel_password_env", &opts.SentinelPassword}} {
		if e.env == "" {
			continue
		}
		if *e.dst = os.Getenv(e.env); *e.dst == "" {
			return opts, fmt.Errorf("the store's %s names $%s, which is not set or empty", e.attr, e.env)
		}
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = max(redisstore.DefaultDialTimeout, sc.Timeout)
	}
	return opts, nil
}

// checkEviction reads Redis's maxmemory-policy (every master's) and warns
// about a policy that forgets live counters once Redis is full: a client
// whose counter is evicted gets a fresh allowance, which no rule can see.
// allkeys-* is an error-level warning; so are volatile-lru, -lfu and
// -random, since every edge key has a TTL. noeviction (a full Redis fails
// writes: on_store_error answers) and volatile-ttl (the counters nearest
// their decay go first) are fine (docs/memory-store.md, "Redis"). It is
// best effort: a managed Redis may refuse CONFIG, which is logged as not
// checked, never as fine.
func checkEviction(ctx context.Context, rs *redisstore.Store, log *slog.Logger) {
	evs, err := rs.Evictions(ctx)
	if err != nil {
		log.Warn("could not check redis maxmemory-policy (managed Redis services often refuse CONFIG): make sure it is noeviction or volatile-ttl; any other policy can evict live counters and give their clients a fresh allowance",
			"error", err.Error())
		return
	}
	for _, e := range evs {
		attrs := []any{"redis", e.Addr, "maxmemory_policy", e.Policy, "maxmemory_bytes", e.MaxMemory}
		switch e.Risk() {
		case redisstore.RiskAnyKey:
			log.Error("REDIS EVICTS LIVE COUNTERS: maxmemory-policy "+e.Policy+" evicts any key once Redis is full, and a client whose counter is evicted gets a fresh allowance (a limit bypass); set maxmemory-policy noeviction (or volatile-ttl)", attrs...)
		case redisstore.RiskLive:
			log.Error("REDIS EVICTS LIVE COUNTERS: every edge key has a TTL, so maxmemory-policy "+e.Policy+" evicts live counters once Redis is full, and their clients get a fresh allowance (a limit bypass); set maxmemory-policy noeviction (or volatile-ttl)", attrs...)
		case redisstore.RiskUnknown:
			log.Warn("unknown redis maxmemory-policy: make sure it never evicts live counters (noeviction or volatile-ttl)", attrs...)
		default:
			log.Info("redis eviction policy checked", attrs...)
		}
	}
}

// checkFailoverLoss reads, for a master that Redis Sentinel manages, its
// min-replicas-to-write, and logs an error when it is 0 (as checkEviction
// does for an eviction policy that forgets live counters): a master being failed
// over then keeps taking counts its promoted replica never sees, and the
// clients they counted get that many requests again, a counter forgotten
// (docs/deploying.md, "What a failover forgets"). Best effort, like
// checkEviction: a refused CONFIG is logged as not checked.
func checkFailoverLoss(ctx context.Context, rs *redisstore.Store, log *slog.Logger) {
	n, managed, err := rs.MinReplicasToWrite(ctx)
	switch {
	case !managed:
	case err != nil:
		log.Warn("could not check the sentinel master's min-replicas-to-write: with 0, a failover forgets the counts the old master takes after its replica's promotion; set min-replicas-to-write 1 and min-replicas-max-lag 1 (docs/deploying.md)", "error", err.Error())
	case n == 0:
		log.Error("A SENTINEL FAILOVER FORGETS COUNTERS: the master's min-replicas-to-write is 0, so while it is failed over it keeps taking counts its promoted replica never sees, and the clients they counted get that many requests again; set min-replicas-to-write 1 and min-replicas-max-lag 1 on every data node (docs/deploying.md, \"What a failover forgets\")")
	default:
		log.Info("sentinel master refuses writes without a replica", "min_replicas_to_write", n)
	}
}

// storeName names the store the node runs on, the policy's sc unless
// the -store flag names another, credentials redacted.
func storeName(sc node.StoreConfig, flagStore string) string {
	switch {
	case flagStore == "memory":
		return "memory"
	case flagStore != "":
		return node.RedactURL(flagStore)
	case sc.Kind == "memory":
		return "memory"
	}
	return node.RedactURL(sc.URL)
}

func demoOrigin(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo-origin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "listener HOST:PORT")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "edge demo-origin:", err)
		return 1
	}
	fmt.Fprintf(stderr, "demo origin listening on %s\n", ln.Addr())
	if err := demo.New().Serve(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "edge demo-origin:", err)
		return 1
	}
	return 0
}
