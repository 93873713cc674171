package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/policytest"
	"github.com/edge-gateway/edge/rules"
)

// Reloads (docs/operations.md, "Reload"). A node reloads its policy file
// on SIGHUP, on a change of the file, and on POST /admin/reload, and all
// three take reloader.reload: the file is parsed and validated, its test
// blocks run (as `edge test` runs them), and only then does it replace the
// running policy, in one atomic swap (gateway.Server.Reload). On any
// failure the running policy stays, and the diagnostics are logged and
// returned. Each setting a running node cannot apply is named in the log
// and in the answer.
//
// Certificates reload on their own (docs/operations.md, "Certificates"):
// a change of the tls block's certificate or key file on disk loads the
// pair alone (reloader.reloadCert), checked as compile checks it, and
// serves it from the next handshake, whatever the state of the policy
// file; a reload that is refused tries the pair too, so SIGHUP from a
// renewal tool's deploy hook serves the renewed certificate even while a
// broken policies.hcl waits on disk. A broken pair is logged and the
// running certificate keeps serving.

// fileDebounce is how long the policy file's directory must be quiet
// before a change of the file reloads it: an editor's save is several
// events (write a temporary file, rename it over the old one, chmod), and
// a deployment tool may write the file in pieces. 200ms is well past the
// events of one save and well under what an operator notices.
const fileDebounce = 200 * time.Millisecond

// startSettings are the settings a node fixed when it started, which a
// reload cannot change: each one a new file changes is named in the
// reload's warnings.
type startSettings struct {
	listen, adminListen string // the listeners' addresses in use
	listenFlag          bool   // -listen overrides the policy's listen
	adminFlag           bool   // -admin overrides the policy's admin_listen
	upstreamFlag        string // -upstream, which overrides the policy's upstream
	maxBodyBytes        int    // the public server's body cap (fasthttp's MaxRequestBodySize)
	keySecretEnv        string // where the key secret was read from
	tls                 bool   // the public listener serves TLS (newReloader sets it: gateway.Server.ServesTLS)
	decideListen        string // the decision-only listener's address; empty: none was opened

	// headerTimeout is the public server's header deadline (newReloader
	// sets it: gateway.Server.HeaderTimeout).
	headerTimeout time.Duration
}

// reloader is a node's one reload path. Reloads run one at a time.
type reloader struct {
	mu     sync.Mutex
	ctx    context.Context // the node's: a reload stops running tests when it is done
	srv    *gateway.Server
	path   string
	log    *slog.Logger
	stderr io.Writer // diagnostics in hcl's form, for the operator at the terminal
	store  *runningStore
	start  startSettings
	// seen is the SHA-256 of the file's content last loaded (at start, or
	// by a reload, refused or not): a change of the file reloads only new
	// content.
	seen [sha256.Size]byte
	// certSeen is the digest of the certificate and key files (tlsDigest)
	// as of the last load, of the policy or of the pair alone, refused or
	// not: a change on disk reloads only new content, and a broken pair is
	// logged once, not at every event. rewatch tells the watch that the
	// files to watch may have changed (after every reload).
	certSeen [sha256.Size]byte
	rewatch  chan struct{}
	// sd is told RELOADING=1 and READY=1 around each reload (sdnotify.go);
	// nil does nothing.
	sd *notifier
}

// newReloader returns the reload path of srv, which serves the policy in
// the file path, started with the settings start. store may be nil (no
// store settings apply).
func newReloader(ctx context.Context, srv *gateway.Server, path string, start startSettings, store *runningStore, log *slog.Logger, stderr io.Writer) *reloader {
	start.tls = srv.ServesTLS()
	start.headerTimeout = srv.HeaderTimeout()
	r := &reloader{ctx: ctx, srv: srv, path: path, log: log, stderr: stderr, store: store, start: start, rewatch: make(chan struct{}, 1)}
	if src, err := os.ReadFile(path); err == nil {
		r.seen = sha256.Sum256(src)
	}
	if t := node.Of(srv.Policy()).TLS; t != nil {
		r.certSeen = t.Digest // the bytes compile read, which the node serves
	}
	return r
}

// reload reloads the policy file for trigger ("signal", "file" or
// "admin") and returns the result, which it has also logged.
func (r *reloader) reload(trigger string) gateway.ReloadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.sd.reloading()
	defer func() { _ = r.sd.reloaded() }()
	res, err := r.load()
	if t := node.Of(r.srv.Policy()).TLS; res.OK && t != nil {
		r.certSeen = t.Digest
	}
	select { // the watch follows the certificate files of the policy in force
	case r.rewatch <- struct{}{}:
	default:
	}
	log := r.log.With("trigger", trigger, "policy", r.path)
	if err != nil {
		res.Diagnostics = append(res.Diagnostics, err.Error())
	}
	r.srv.CountReload(res.OK) // edge_reloads_total
	if !res.OK {
		res.Rules = len(r.srv.Policy().Rules)
		log.Error("reload refused: keeping the running policy", "diagnostics", res.Diagnostics, "warnings", res.Warnings)
		// The policy's state does not hold back a renewed certificate.
		if w := r.reloadCert(trigger); w != "" {
			res.Warnings = append(res.Warnings, w)
		}
		return res
	}
	log.Info("policy reloaded", "rules", res.Rules, "warnings", res.Warnings)
	return res
}

// load is reload under the lock: it refuses (OK false, with diagnostics)
// or swaps the new policy in. An error is a diagnostic without a position.
func (r *reloader) load() (gateway.ReloadResult, error) {
	var res gateway.ReloadResult
	src, err := os.ReadFile(r.path)
	if err != nil {
		return res, fmt.Errorf("%s: reading the policy: %w", r.path, err)
	}
	r.seen = sha256.Sum256(src)
	np, diags := builtin.Load(r.path, src)
	if !diags.HasErrors() {
		tests, td := policytest.Parse(r.path, src)
		diags = append(diags, td...)
		if !td.HasErrors() {
			diags = append(diags, policytest.Check(np, tests)...)
		}
		if !diags.HasErrors() {
			if err := r.runTests(np, tests, &res); err != nil {
				return res, err
			}
		}
	}
	printDiags(r.stderr, r.path, diags)
	for _, d := range diags {
		line := diagLine(r.path, d)
		if d.Severity == hcl.DiagError {
			res.Diagnostics = append(res.Diagnostics, line)
		} else {
			res.Warnings = append(res.Warnings, line)
		}
	}
	if len(res.Diagnostics) > 0 {
		return res, nil
	}
	warnings := r.notApplied(np)
	if err := r.srv.Reload(np); err != nil {
		return res, fmt.Errorf("%s: installing the policy: %w", r.path, err)
	}
	warnings = append(warnings, r.store.apply(np, r.log)...)
	for _, w := range warnings {
		r.log.Warn("reload cannot apply a setting: the node keeps the value it started with until a restart", "setting", w.setting, "detail", w.detail)
		res.Warnings = append(res.Warnings, w.String())
	}
	res.OK, res.Rules = true, len(np.Rules)
	return res, nil
}

// runTests runs np's test blocks as `edge test` does; a failing test adds
// a diagnostic at its block, naming its failing request's line
// ("FILE:LINE,COL: test NAME failed: request 2: ... (FILE:LINE)").
func (r *reloader) runTests(np *rules.Policy, tests []policytest.Test, res *gateway.ReloadResult) error {
	if len(tests) == 0 {
		return nil
	}
	var out bytes.Buffer
	failed, err := policytest.RunFailures(r.ctx, np, tests, &out)
	if err != nil {
		return fmt.Errorf("%s: running the test blocks: %w", r.path, err)
	}
	if len(failed) == 0 {
		return nil
	}
	for _, f := range failed {
		res.Diagnostics = append(res.Diagnostics, fmt.Sprintf("%s: test %q failed: %s (%s:%d)", f.Test.Range.String(), f.Test.Name, f.Msg, f.At.Filename, f.At.Start.Line))
	}
	fmt.Fprint(r.stderr, out.String())
	return nil
}

// diagLine is one diagnostic as printDiags writes it, without the
// "warning: " prefix.
func diagLine(file string, d *hcl.Diagnostic) string {
	if d.Subject == nil {
		return fmt.Sprintf("%s: %s; %s", file, d.Summary, d.Detail)
	}
	return d.Error()
}

// unapplied is a setting of a new policy that the running node cannot
// apply, and what the node does instead.
type unapplied struct{ setting, detail string }

func (u unapplied) String() string { return u.setting + ": " + u.detail }

// notApplied lists the settings of np that differ from those the node
// started with and that a reload cannot apply (docs/operations.md,
// "Reload"): the reload goes on and each is a warning, since refusing it
// would hold back the rule changes of the same file, which are what an
// operator reloads for.
func (r *reloader) notApplied(np *rules.Policy) []unapplied {
	var out []unapplied
	s := r.start
	nc := node.Of(np)
	if !s.listenFlag && nc.Listen != s.listen {
		out = append(out, unapplied{"listen", fmt.Sprintf("the node keeps listening on %s (a reload cannot move a bound listener); %s takes effect at the next restart", s.listen, nc.Listen)})
	}
	if !s.adminFlag && nc.AdminListen != s.adminListen {
		out = append(out, unapplied{"admin_listen", fmt.Sprintf("the admin listener stays on %s (a reload cannot move a bound listener); %s takes effect at the next restart", s.adminListen, nc.AdminListen)})
	}
	if nc.MaxBodyBytes != s.maxBodyBytes {
		out = append(out, unapplied{"max_body_bytes", fmt.Sprintf("the public server's body cap is fixed when it starts: bodies over %d bytes still answer 413 and bodies up to it are read; %d takes effect at the next restart", s.maxBodyBytes, nc.MaxBodyBytes)})
	}
	if nc.Conns.HeaderTimeout != s.headerTimeout {
		out = append(out, unapplied{"header_timeout", fmt.Sprintf("the public server's header deadline is fixed when it starts: headers still have %v; %v takes effect at the next restart", s.headerTimeout, nc.Conns.HeaderTimeout)})
	}
	if nc.KeySecretEnv != s.keySecretEnv {
		out = append(out, unapplied{"key_secret_env", fmt.Sprintf("the node keeps the key secret it read from $%s at start; $%s is read at the next restart, and if it holds another secret every counter starts over then", s.keySecretEnv, nc.KeySecretEnv)})
	}
	if nc.TLS != nil && !s.tls {
		out = append(out, unapplied{"tls", "the public listener stays plain HTTP (a reload cannot turn a bound listener into TLS); the tls block takes effect at the next restart"})
	}
	if nc.TLS == nil && s.tls {
		out = append(out, unapplied{"tls", "the public listener stays TLS, serving the last certificate it loaded (a reload cannot turn a bound listener into plain HTTP); plain HTTP takes effect at the next restart"})
	}
	switch {
	case np.DecideListen == s.decideListen:
	case s.decideListen == "":
		out = append(out, unapplied{"decide_listen", fmt.Sprintf("no decision-only listener was opened at start (a reload cannot bind one); %s opens at the next restart", np.DecideListen)})
	case np.DecideListen == "":
		out = append(out, unapplied{"decide_listen", fmt.Sprintf("the decision-only listener on %s stays open but answers 503 to every described request, since the policy in force was not checked for it; it closes at the next restart", s.decideListen)})
	default:
		out = append(out, unapplied{"decide_listen", fmt.Sprintf("the decision-only listener stays on %s (a reload cannot move a bound listener); %s takes effect at the next restart", s.decideListen, np.DecideListen)})
	}
	if s.upstreamFlag != "" && nc.Upstream != node.Of(r.srv.Policy()).Upstream {
		out = append(out, unapplied{"upstream", fmt.Sprintf("-upstream %s overrides the policy's upstream", s.upstreamFlag)})
	}
	return out
}

// watch reloads the policy file whenever its content changes, and the
// policy whenever the content of its tls block's certificate or key file
// changes (a renewal on disk), until ctx is done; the watch is in place
// when it returns, and done is closed once it has stopped. It watches
// directories, not files: editors and deployment tools replace a file
// (write a temporary file, then rename it over the old one), which ends a
// watch on the file itself, a Kubernetes ConfigMap or Secret swaps a
// symlink (..data) beside it, and certbot repoints the symlinks of its
// live/ directory. For the certificate files it watches the directory of
// each path as written and that of the file its symlinks lead to (a file
// edited in place behind a link), following the policy in force after
// every reload. Any event in those directories, once they have been quiet
// for fileDebounce, rereads the files: a new policy file reloads through
// the one reload path, and new certificate files reload the certificate
// alone (reloadCert), whatever the policy file holds; a broken pair is
// logged and the running certificate keeps serving. A policy file that is
// gone or empty is logged and waited for; the running policy stays.
func (r *reloader) watch(ctx context.Context) (done <-chan struct{}, err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching the policy file: %w", err)
	}
	dir := filepath.Dir(r.path)
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watching the policy file's directory %s: %w", dir, err)
	}
	cw := &certWatch{w: w, base: dir, dirs: map[string]bool{}, log: r.log}
	cw.follow(node.Of(r.srv.Policy()).TLS)
	c := make(chan struct{})
	go func() {
		defer close(c)
		defer w.Close()
		r.watchLoop(ctx, w, cw)
	}()
	return c, nil
}

// watchLoop is watch's goroutine: it debounces w's events into rereads.
func (r *reloader) watchLoop(ctx context.Context, w *fsnotify.Watcher, cw *certWatch) {
	debounce := time.NewTimer(fileDebounce)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			debounce.Reset(fileDebounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow drops events: reread the file to be sure.
			r.log.Warn("watching the policy file", "policy", r.path, "error", err.Error())
			debounce.Reset(fileDebounce)
		case <-r.rewatch:
			cw.follow(node.Of(r.srv.Policy()).TLS)
		case <-debounce.C:
			r.filesChanged()
		}
	}
}

// filesChanged reloads the policy if its file's content is new (which
// takes a renewed certificate with it, or alone if the policy is
// refused), and otherwise the certificate if its files' content is.
func (r *reloader) filesChanged() {
	if r.fileChanged() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reloadCert("certificate")
}

// reloadCert is the certificate reload, under r.mu: if the content of the
// certificate or key file of the policy in force differs from certSeen, it
// loads the pair alone (node.LoadListenerTLS, the checks compile makes)
// and serves it from the next handshake (gateway.Server.SetCertificate),
// without the policy file. A pair that does not load is logged as an
// error and the running certificate keeps serving. It returns a line for
// a reload's warnings when it served a new certificate, "" otherwise.
func (r *reloader) reloadCert(trigger string) string {
	t := node.Of(r.srv.Policy()).TLS
	if t == nil || !r.start.tls {
		return ""
	}
	// The files as they are before the load reads them: a write during
	// the load is an event, whose check then sees new content.
	before := tlsDigest(t)
	if before == r.certSeen {
		return ""
	}
	r.certSeen = before
	log := r.log.With("trigger", trigger, "cert_file", t.CertFile, "key_file", t.KeyFile)
	nt, err := node.LoadListenerTLS(t.CertFile, t.KeyFile, time.Now())
	if err != nil {
		log.Error("certificate reload refused: keeping the running certificate", "error", err.Error())
		return ""
	}
	r.srv.SetCertificate(nt)
	leaf := nt.Certificate.Leaf
	log.Info("certificate reloaded", "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.Text(16),
		"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	return fmt.Sprintf("tls: the certificate on disk (serial %s, until %s) serves from the next handshake, though the policy was refused", leaf.SerialNumber.Text(16), leaf.NotAfter.UTC().Format(time.RFC3339))
}

// fileChanged reloads the policy file if its content is new, and reports
// whether it did (a file that is gone or empty is waited for, and leaves
// the certificate to filesChanged).
func (r *reloader) fileChanged() bool {
	src, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("policy file is gone: keeping the running policy until it is back", "policy", r.path)
		return false
	}
	if err == nil && len(src) == 0 {
		// A writer that truncates first (os.WriteFile, a shell's >) may
		// still be writing: an empty file would load as a policy without
		// rules. Its next write is an event, which rereads it.
		r.log.Warn("policy file is empty: keeping the running policy until it has content", "policy", r.path)
		return false
	}
	if err == nil {
		r.mu.Lock()
		same := sha256.Sum256(src) == r.seen
		r.mu.Unlock()
		if same {
			return false
		}
	}
	r.reload("file")
	return true
}

// tlsDigest is the SHA-256 of t's certificate and key files as they are
// now, computed as node.ListenerTLS.Digest is (a file that cannot be read
// hashes its error instead, so that its going and coming back are
// changes); zero without t.
func tlsDigest(t *node.ListenerTLS) (d [sha256.Size]byte) {
	if t == nil {
		return d
	}
	h := sha256.New()
	for _, f := range []string{t.CertFile, t.KeyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			h.Write([]byte("\x00unreadable: " + err.Error()))
			continue
		}
		h.Write(b)
	}
	h.Sum(d[:0])
	return d
}

// certWatch is the set of certificate directories a watch holds, besides
// the policy file's (base). Only watch's goroutine uses it.
type certWatch struct {
	w    *fsnotify.Watcher
	base string
	dirs map[string]bool
	log  *slog.Logger
}

// follow watches the directories of t's files (as written and as their
// symlinks resolve) and stops watching those it no longer needs.
func (cw *certWatch) follow(t *node.ListenerTLS) {
	want := map[string]bool{}
	if t != nil {
		for _, f := range []string{t.CertFile, t.KeyFile} {
			want[filepath.Dir(f)] = true
			if real, err := filepath.EvalSymlinks(f); err == nil {
				want[filepath.Dir(real)] = true
			}
		}
	}
	delete(want, cw.base)
	for d := range cw.dirs {
		if !want[d] {
			_ = cw.w.Remove(d) // gone already, if its directory was removed
			delete(cw.dirs, d)
		}
	}
	for d := range want {
		if cw.dirs[d] {
			continue
		}
		if err := cw.w.Add(d); err != nil {
			cw.log.Warn("not reloading on changes of the certificate files in a directory (SIGHUP and POST /admin/reload still do)", "dir", d, "error", err.Error())
			continue
		}
		cw.dirs[d] = true
	}
}

// runningStore is the store a node opened at start, for reloads: which of
// a new policy's store settings apply and which wait for a restart.
type runningStore struct {
	flag string            // the -store flag: it overrides the policy's kind and url
	cfg  node.StoreConfig  // the settings in force
	fc   *failclosed.Store // nil for the memory store
}

// apply applies np's store settings that can change while the node runs
// (fleet_size, which sizes the "local" fallback buckets; the memory store's
// max_keys, which sizes the rules' key budgets that every op carries),
// logs a warning naming those that cannot (kind, url, timeout: the node
// keeps its open store until it restarts), and returns them.
func (r *runningStore) apply(np *rules.Policy, log *slog.Logger) []unapplied {
	if r == nil {
		return nil
	}
	sc := node.Of(np).Store
	if sc.FleetSize != r.cfg.FleetSize {
		if r.fc != nil {
			r.fc.SetFleetSize(sc.FleetSize)
		}
		log.Info("store fleet_size changed", "from", r.cfg.FleetSize, "to", sc.FleetSize)
		r.cfg.FleetSize = sc.FleetSize
	}
	running := storeName(r.cfg, r.flag)
	var restart []string
	var out []unapplied
	if r.flag == "" && sc.Kind != r.cfg.Kind {
		restart = append(restart, "kind")
		out = append(out, unapplied{"store kind", fmt.Sprintf("the node keeps its %s store (a reload cannot move counters to another store); %q takes effect at the next restart", r.cfg.Kind, sc.Kind)})
	}
	if r.flag == "" && sc.URL != r.cfg.URL {
		restart = append(restart, "url")
		out = append(out, unapplied{"store url", fmt.Sprintf("the node keeps its store at %s; %s takes effect at the next restart", running, node.RedactURL(sc.URL))})
	}
	if sc.Timeout != r.cfg.Timeout && r.fc != nil { // timeout is the Redis store's budget
		restart = append(restart, "timeout")
		out = append(out, unapplied{"store timeout", fmt.Sprintf("the Redis client's timeouts are fixed when it is made: the node keeps %s; %s takes effect at the next restart", r.cfg.Timeout, sc.Timeout)})
	}
	if sc.MaxKeys != r.cfg.MaxKeys && r.fc == nil { // max_keys bounds the memory store only
		// Its rules' shares travel in their ops (rules.Op.MaxKeys): each
		// budget follows from its next new key (docs/memory-store.md).
		log.Info("store max_keys changed: the rules' key budgets follow it from their next new key", "from", r.cfg.MaxKeys, "to", sc.MaxKeys)
		r.cfg.MaxKeys = sc.MaxKeys
	}
	if len(restart) > 0 {
		log.Warn("store settings changed in the policy apply at the next restart; the node keeps its running store",
			"settings", strings.Join(restart, ","), "running_store", running)
	}
	return out
}

// reload loads path and swaps it into srv through the node's one reload
// path (reloader.reload), for callers that hold no reloader; the error
// lists the diagnostics of a refused reload. running may be nil.
func reload(srv *gateway.Server, path string, log *slog.Logger, stderr io.Writer, running *runningStore) error {
	p := srv.Policy()
	r := newReloader(context.Background(), srv, path, startSettings{
		listen: node.Of(p).Listen, adminListen: node.Of(p).AdminListen, maxBodyBytes: node.Of(p).MaxBodyBytes, keySecretEnv: node.Of(p).KeySecretEnv, decideListen: p.DecideListen,
	}, running, log, stderr)
	if res := r.reload("signal"); !res.OK {
		return errors.New(strings.Join(res.Diagnostics, "\n"))
	}
	return nil
}
