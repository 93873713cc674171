package main

import (
	"bufio"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// Binary upgrades (docs/deploying.md, "Graceful restarts and binary
// upgrades"). On SIGUSR2 the running node (the old process) starts the
// binary at its own path with its own arguments, passing it its listening
// sockets and two pipes:
//
//  1. The old process writes the state the new one needs before it can
//     decide anything: the key secret and the visitor secret in use
//     (random ones when their variables are unset: new ones would re-key
//     every counter and void every visitor cookie, a limit bypass), over
//     the state pipe, never in the environment or the arguments.
//  2. The new process loads its policy, opens its store and its listeners
//     (the inherited sockets), and writes 'R' on the ready pipe. A policy
//     that does not load, a binary that does not start or a process that
//     exits before that fails the upgrade: the old process logs why, keeps
//     serving, and takes the next SIGUSR2.
//  3. On 'R', the old process tells systemd the new PID (MAINPID=), stops
//     accepting and drains its requests in flight (fasthttp's Shutdown:
//     idle keep-alive connections are closed, busy ones answer with
//     Connection: close), then writes its memory store's snapshot
//     (memstore.Snapshot) on the state pipe and exits.
//  4. The new process restores the snapshot and only then accepts. Between
//     the old process's last accept and the new one's first, connections
//     wait in the sockets' backlog: none is refused, and the two processes
//     never serve on two copies of the counters. The new process logs that
//     gap (accept_gap_ms).
//
// With Redis the counters are in Redis: nothing but the secrets is handed
// over.

const (
	// upgradeFDsEnv names the new process's ends of the pipes: READY,STATE.
	upgradeFDsEnv = "EDGE_UPGRADE_FDS"
	// upgradeMagic starts the state pipe; its version byte follows.
	upgradeMagic   = "edge-upgrade"
	upgradeVersion = 2
	// upgradeVersionNoFormats is the state of a binary before key formats:
	// its memory store's keys are format 1 (handedState.keyFormats).
	upgradeVersionNoFormats = 1
	// maxHandedSecret bounds a secret read from the state pipe, in bytes.
	maxHandedSecret = 4096

	// readyTimeout bounds the new process's start: loading its policy
	// (MaxMind databases included) and opening its store. Past it the new
	// process is killed and the old one keeps serving.
	readyTimeout = time.Minute
	// stateTimeout bounds how long a new process that is ready waits for
	// the old one's counters: the old one's drain is bounded by the
	// servers' shutdown grace (5s). Past it, the new process starts with
	// empty counters, loudly.
	stateTimeout = time.Minute
	// servingTimeout bounds how long the old process waits, once it has
	// handed over, for the new one to say it accepts.
	servingTimeout = 30 * time.Second
)

// Messages on the ready pipe, from the new process.
const (
	msgReady   = 'R' // loaded, listening: stop accepting and hand over
	msgServing = 'S' // restored, accepting
)

// handedState is what the state pipe carries before the counters.
type handedState struct {
	keySecret     []byte // the key secret in use
	visitorSecret []byte // the random visitor secret in use; nil when none
	// formats returns, on the old process's side, the key formats its
	// engine hashes in at the handover (nil: format 2 alone).
	formats func() rules.KeyFormats
	// keyFormats is, on the new process's side, what the old process's
	// memory-store keys were hashed in: handed (version 2), or format 1
	// alone from a binary before key formats (version 1).
	keyFormats rules.KeyFormats
}

// memoryKeyFormats returns the key formats a memory-store node started by
// a binary upgrade hashes in at now, so that no restored counter is
// forgotten (docs/deploying.md, "Key format and rolling upgrades"): keys
// restored in format 1 are kept beside format 2 for a migration window of
// lifetime (the policy's longest key lifetime) plus a minute; a window the
// old process was in goes on to its end; otherwise format 2.
func (h handedState) memoryKeyFormats(now time.Time, lifetime time.Duration) rules.KeyFormats {
	f := h.keyFormats
	switch {
	case now.Before(f.DualUntil):
		return rules.KeyFormats{Format: rules.KeyFormat2, DualUntil: f.DualUntil}
	case f.Format == rules.KeyFormat1:
		return rules.KeyFormats{Format: rules.KeyFormat2, DualUntil: now.Add(lifetime + time.Minute)}
	}
	return rules.KeyFormats{Format: rules.KeyFormat2}
}

// upgrader is the old process's side of a binary upgrade.
type upgrader struct {
	log   *slog.Logger
	sd    *notifier
	exe   string   // the binary at the node's own path, as started
	args  []string // the node's arguments
	state handedState
	store *memstore.Store // nil with Redis: nothing to hand over

	mu        sync.Mutex
	child     *os.Process // the upgrade under way, nil when none
	readyR    *os.File    // the ready pipe's read end
	stateW    *os.File    // the state pipe's write end
	exited    chan struct{}
	exitErr   error
	events    chan upgradeEvent
	handing   atomic.Bool // the new process is ready: the node is handing over
	stoppedAt time.Time   // when this process stopped accepting
}

// upgradeEvent is the outcome of an upgrade's start: the new process is
// ready (err nil), or it failed.
type upgradeEvent struct {
	pid int
	err error
}

// selfPath is the binary the node upgrades to: the path it was started by
// (argv[0], made absolute now), so that replacing that file, or a symlink
// swapped to a new release, is what the next SIGUSR2 starts. Without a
// path in argv[0] (found in $PATH), it is the one $PATH finds, and else
// os.Executable's, which reads /proc/self/exe: the file this process runs,
// re-read at each upgrade.
func selfPath() string {
	arg0 := os.Args[0]
	if strings.ContainsRune(arg0, os.PathSeparator) {
		if p, err := filepath.Abs(arg0); err == nil {
			return p
		}
	} else if p, err := exec.LookPath(arg0); err == nil {
		if p, err := filepath.Abs(p); err == nil {
			return p
		}
	}
	return ""
}

// newUpgrader returns the old process's side of an upgrade for a node run
// with args, which hands over state and, for the memory store, ms's
// counters.
func newUpgrader(log *slog.Logger, sd *notifier, args []string, state handedState, ms *memstore.Store) *upgrader {
	return &upgrader{log: log, sd: sd, exe: selfPath(), args: args, state: state, store: ms, events: make(chan upgradeEvent, 1)}
}

// Events delivers the outcome of each upgrade started.
func (u *upgrader) Events() <-chan upgradeEvent { return u.events }

// handingOver reports whether the node is handing over to a new process
// (it must not tell systemd it stops).
func (u *upgrader) handingOver() bool { return u.handing.Load() }

// start starts the new process (on SIGUSR2). One upgrade runs at a time; a
// signal while one is under way is logged and ignored.
func (u *upgrader) start() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.child != nil || u.handing.Load() {
		u.log.Warn("binary upgrade already under way: signal ignored")
		return
	}
	exe := u.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			u.log.Error("binary upgrade failed: cannot find this binary's path; still serving", "error", err.Error())
			return
		}
	}
	if err := u.spawn(exe); err != nil {
		u.log.Error("binary upgrade failed: still serving", "binary", exe, "error", err.Error())
		return
	}
	u.log.Info("binary upgrade: new process started", "binary", exe, "pid", u.child.Pid)
}

// spawn starts exe with the listeners and the pipes. u.mu is held.
//
// The descriptors go to the new process as they are, by number
// (syscall.ForkExec): os/exec's ExtraFiles would call File.Fd, which puts
// each listener's shared file description in blocking mode, and an accept
// then blocked in the kernel holds up this process's shutdown.
func (u *upgrader) spawn(exe string) error {
	fds, names, err := listeners.fds()
	if err != nil {
		return err
	}
	var lenv []string
	for i, name := range names {
		lenv = append(lenv, name+":"+strconv.Itoa(3+i))
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("making the ready pipe: %w", err)
	}
	defer readyW.Close()
	stateR, stateW, err := os.Pipe()
	if err != nil {
		readyR.Close()
		return fmt.Errorf("making the state pipe: %w", err)
	}
	defer stateR.Close()
	files := append([]uintptr{0, 1, 2}, fds...)
	for _, f := range []*os.File{readyW, stateR} {
		fd, err := rawFD(f)
		if err != nil {
			readyR.Close()
			stateW.Close()
			return err
		}
		files = append(files, fd)
	}
	env := append(upgradeEnviron(),
		listenFDsEnv+"="+strings.Join(lenv, ","),
		fmt.Sprintf("%s=%d,%d", upgradeFDsEnv, 3+len(fds), 4+len(fds)))
	pid, err := forkExec(exe, append([]string{os.Args[0]}, u.args...), env, files)
	if err != nil {
		readyR.Close()
		stateW.Close()
		return fmt.Errorf("starting the new binary: %w", err)
	}
	proc, err := os.FindProcess(pid)
	if err != nil { // not on unix
		readyR.Close()
		stateW.Close()
		return err
	}
	u.child, u.readyR, u.stateW = proc, readyR, stateW
	u.exited = make(chan struct{})
	go func() {
		ps, err := proc.Wait()
		if err == nil {
			err = errors.New(ps.String())
		}
		u.exitErr = err
		close(u.exited)
	}()
	go u.watch(proc, readyR, stateW)
	return nil
}

// rawFD is f's descriptor, read without File.Fd (which would make it
// blocking).
func rawFD(f *os.File) (uintptr, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("passing %s: %w", f.Name(), err)
	}
	var fd uintptr
	if err := rc.Control(func(d uintptr) { fd = d }); err != nil {
		return 0, fmt.Errorf("passing %s: %w", f.Name(), err)
	}
	return fd, nil
}

// upgradeEnviron is the environment without the variables of this
// process's own inheritance.
func upgradeEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case listenFDsEnv, upgradeFDsEnv, "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// watch writes the state, waits for the new process's 'R' (or its exit,
// or readyTimeout) and reports the outcome on events.
func (u *upgrader) watch(proc *os.Process, readyR, stateW *os.File) {
	pid := proc.Pid
	got := make(chan error, 1)
	go func() {
		if err := writeHandedState(stateW, u.state); err != nil {
			got <- err
			return
		}
		var b [1]byte
		if _, err := io.ReadFull(readyR, b[:]); err != nil {
			got <- errors.New("the new process closed the ready pipe before it was ready")
			return
		}
		if b[0] != msgReady {
			got <- fmt.Errorf("the new process sent %q, not ready", b[0])
			return
		}
		got <- nil
	}()
	var err error
	select {
	case err = <-got:
		if err != nil {
			// A closed pipe is a process on its way out: its exit status
			// says more than the pipe.
			select {
			case <-u.exited:
				err = fmt.Errorf("the new process exited before it was ready (%v): its log says why", u.exitErr)
			case <-time.After(5 * time.Second):
			}
		}
	case <-u.exited:
		err = fmt.Errorf("the new process exited before it was ready (%v): its log says why", u.exitErr)
	case <-time.After(readyTimeout):
		err = fmt.Errorf("the new process was not ready within %s: killed", readyTimeout)
	}
	if err != nil {
		proc.Kill()
		<-u.exited
		u.mu.Lock()
		readyR.Close()
		stateW.Close()
		u.child = nil
		u.mu.Unlock()
	}
	u.events <- upgradeEvent{pid: pid, err: err}
}

// stopServing is the event of a ready new process: this process hands
// over. It tells systemd the new main PID, and the caller stops the
// servers (cancels their context) right after.
func (u *upgrader) stopServing(pid int) {
	u.handing.Store(true)
	if err := u.sd.handOver(pid); err != nil {
		u.log.Warn("binary upgrade: could not tell systemd the new main PID", "error", err.Error())
	}
	u.mu.Lock()
	u.stoppedAt = time.Now()
	u.mu.Unlock()
	u.log.Info("binary upgrade: the new process is ready; this one stops accepting, drains its requests and hands over", "pid", pid)
}

// handOver runs once this process's servers have stopped: it writes the
// counters to the new process, waits until it accepts, and returns the
// process's exit code.
func (u *upgrader) handOver() int {
	u.mu.Lock()
	proc, readyR, stateW, stoppedAt := u.child, u.readyR, u.stateW, u.stoppedAt
	u.mu.Unlock()
	pid := proc.Pid
	drained := time.Since(stoppedAt)
	keys, err := writeCounters(stateW, stoppedAt, u.store)
	stateW.Close()
	if err != nil {
		u.log.Error("binary upgrade: handing the counters over failed: the new process starts with empty counters", "pid", pid, "error", err.Error())
	}
	served := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := io.ReadFull(readyR, b[:])
		if err == nil && b[0] != msgServing {
			err = fmt.Errorf("the new process sent %q", b[0])
		}
		served <- err
	}()
	defer readyR.Close()
	select {
	case err = <-served:
	case <-u.exited:
		err = fmt.Errorf("the new process exited (%v)", u.exitErr)
	case <-time.After(servingTimeout):
		err = fmt.Errorf("the new process did not say it accepts within %s", servingTimeout)
	}
	if err != nil {
		u.log.Error("binary upgrade: the new process did not take over: nothing may be serving", "pid", pid, "error", err.Error())
		return 1
	}
	u.log.Info("binary upgrade: handed over; exiting", "pid", pid, "keys", keys, "drain_ms", float64(drained.Microseconds())/1000)
	return 0
}

// writeHandedState writes the state pipe's first part.
func writeHandedState(w io.Writer, st handedState) error {
	b := append([]byte(upgradeMagic), upgradeVersion)
	b = binary.AppendUvarint(b, uint64(len(st.keySecret)))
	b = append(b, st.keySecret...)
	b = binary.AppendUvarint(b, uint64(len(st.visitorSecret)))
	b = append(b, st.visitorSecret...)
	f := rules.KeyFormats{Format: rules.KeyFormat2}
	if st.formats != nil {
		f = st.formats()
	}
	var until int64
	if !f.DualUntil.IsZero() {
		until = f.DualUntil.UnixMicro()
	}
	b = append(b, byte(f.Format))
	b = binary.AppendVarint(b, until)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("writing the state pipe: %w", err)
	}
	return nil
}

// writeCounters writes the state pipe's second part: when this process
// stopped accepting (µs since the epoch), whether counters follow, and the
// memory store's snapshot.
func writeCounters(w io.Writer, stoppedAt time.Time, ms *memstore.Store) (keys int, err error) {
	b := binary.AppendVarint(nil, stoppedAt.UnixMicro())
	if ms == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
	}
	if _, err := w.Write(b); err != nil {
		return 0, fmt.Errorf("writing the state pipe: %w", err)
	}
	if ms == nil {
		return 0, nil
	}
	return ms.Snapshot(w)
}

// inheritance is the new process's side of a binary upgrade.
type inheritance struct {
	log    *slog.Logger
	readyW *os.File
	stateR *bufio.Reader
	state  *os.File
	handedState
}

// inherit returns the new process's side when the node was started by a
// binary upgrade ($EDGE_UPGRADE_FDS), having read the state the old process
// handed over; nil otherwise.
func inherit(log *slog.Logger) (*inheritance, error) {
	v, ok := os.LookupEnv(upgradeFDsEnv)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(upgradeFDsEnv)
	readyText, stateText, _ := strings.Cut(v, ",")
	rfd, err1 := strconv.Atoi(readyText)
	sfd, err2 := strconv.Atoi(stateText)
	if err1 != nil || err2 != nil || rfd < 3 || sfd < 3 {
		return nil, fmt.Errorf("$%s %q is not READY,STATE descriptors", upgradeFDsEnv, v)
	}
	h := &inheritance{log: log, readyW: os.NewFile(uintptr(rfd), "upgrade-ready"), state: os.NewFile(uintptr(sfd), "upgrade-state")}
	h.stateR = bufio.NewReader(h.state)
	if err := h.readHandedState(); err != nil {
		h.close()
		return nil, fmt.Errorf("reading the state the previous process handed over: %w", err)
	}
	return h, nil
}

func (h *inheritance) readHandedState() error {
	head := make([]byte, len(upgradeMagic)+1)
	if _, err := io.ReadFull(h.stateR, head); err != nil {
		return err
	}
	version := head[len(upgradeMagic)]
	if string(head[:len(upgradeMagic)]) != upgradeMagic || (version != upgradeVersion && version != upgradeVersionNoFormats) {
		return fmt.Errorf("not version %d or %d of the upgrade state (the previous binary is too old or too new to hand over to this one)", upgradeVersionNoFormats, upgradeVersion)
	}
	for _, dst := range []*[]byte{&h.keySecret, &h.visitorSecret} {
		n, err := binary.ReadUvarint(h.stateR)
		if err != nil {
			return err
		}
		if n > maxHandedSecret {
			return fmt.Errorf("a secret of %d bytes (at most %d)", n, maxHandedSecret)
		}
		if n == 0 {
			continue
		}
		*dst = make([]byte, n)
		if _, err := io.ReadFull(h.stateR, *dst); err != nil {
			return err
		}
	}
	if version == upgradeVersionNoFormats {
		h.keyFormats = rules.KeyFormats{Format: rules.KeyFormat1}
		return nil
	}
	format, err := h.stateR.ReadByte()
	if err != nil {
		return err
	}
	until, err := binary.ReadVarint(h.stateR)
	if err != nil {
		return err
	}
	if f := rules.KeyFormat(format); f != rules.KeyFormat1 && f != rules.KeyFormat2 {
		return fmt.Errorf("key format %d (this binary knows 1 and 2)", format)
	}
	h.keyFormats = rules.KeyFormats{Format: rules.KeyFormat(format)}
	if until != 0 {
		h.keyFormats.DualUntil = time.UnixMicro(until)
	}
	return nil
}

func (h *inheritance) close() {
	h.readyW.Close()
	h.state.Close()
}

// takeOver says the new process is ready, waits for the old one's
// counters and restores them into ms (nil with Redis), before the node
// accepts. secret is the key secret the node runs with: counters keyed
// under another one mean nothing to it. A snapshot that cannot be read
// leaves the store empty, loudly: the node still starts.
func (h *inheritance) takeOver(ms *memstore.Store, secret []byte) error {
	if _, err := h.readyW.Write([]byte{msgReady}); err != nil {
		return fmt.Errorf("telling the previous process this one is ready: %w", err)
	}
	type result struct {
		stoppedAt time.Time
		keys      int
		err       error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.keys, r.stoppedAt, r.err = h.restore(ms, secret)
		done <- r
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(stateTimeout):
		h.state.Close() // the reader returns
		r = <-done
		r.err = fmt.Errorf("the previous process sent no counters within %s", stateTimeout)
	}
	if r.err != nil {
		h.log.Error("BINARY UPGRADE LOST THE COUNTERS: starting with an empty memory store; clients the previous process was refusing get a fresh allowance", "error", r.err.Error())
		return nil
	}
	attrs := []any{"parent_pid", os.Getppid(), "keys", r.keys}
	if !r.stoppedAt.IsZero() {
		attrs = append(attrs, "accept_gap_ms", float64(time.Since(r.stoppedAt).Microseconds())/1000)
	}
	h.log.Info("binary upgrade: took over from the previous process", attrs...)
	return nil
}

// restore reads the state pipe's second part into ms.
func (h *inheritance) restore(ms *memstore.Store, secret []byte) (keys int, stoppedAt time.Time, err error) {
	us, err := binary.ReadVarint(h.stateR)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("reading the state pipe: %w", noEOF(err))
	}
	stoppedAt = time.UnixMicro(us)
	kind, err := h.stateR.ReadByte()
	if err != nil {
		return 0, stoppedAt, fmt.Errorf("reading the state pipe: %w", noEOF(err))
	}
	switch {
	case kind == 0 && ms == nil: // Redis both sides: the counters are there
		return 0, stoppedAt, nil
	case kind == 0:
		h.log.Warn("binary upgrade: the previous process had no memory store (its counters are in Redis): this one starts with an empty memory store")
		return 0, stoppedAt, nil
	case kind != 1:
		return 0, stoppedAt, fmt.Errorf("the state pipe says store %d", kind)
	case ms == nil:
		h.log.Warn("binary upgrade: the previous process's counters were in its memory store; this one counts in Redis from zero")
		_, _ = io.Copy(io.Discard, h.stateR)
		return 0, stoppedAt, nil
	case subtle.ConstantTimeCompare(secret, h.keySecret) != 1:
		_, _ = io.Copy(io.Discard, h.stateR)
		return 0, stoppedAt, errors.New("the key secret changed across the upgrade: the previous counters are keyed under the old one")
	}
	keys, err = ms.Restore(h.stateR)
	return keys, stoppedAt, err
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// serving says the node accepts: the old process exits.
func (h *inheritance) serving() {
	if _, err := h.readyW.Write([]byte{msgServing}); err != nil {
		h.log.Warn("binary upgrade: could not tell the previous process this one accepts", "error", err.Error())
	}
	h.close()
}

// memoryStore is st when it is the memory store, else nil.
func memoryStore(st rules.Store) *memstore.Store {
	ms, _ := st.(*memstore.Store)
	return ms
}

// notifyUpgrade relays the upgrade signals to c. The node registers them
// first thing: SIGUSR2's default action kills the process.
func notifyUpgrade(c chan<- os.Signal) {
	if len(upgradeSignals) > 0 { // signal.Notify with none relays every signal
		signal.Notify(c, upgradeSignals...)
	}
}

// visitorSecretFor is the visitor secret a node uses when the visitor
// block's variable is unset: the one the previous process handed over, or
// a new random one.
func visitorSecretFor(h *inheritance) []byte {
	if h != nil && h.visitorSecret != nil {
		return h.visitorSecret
	}
	return nat.RandomSecret()
}

// handedKeySecret is the key secret the previous process ran with, or nil
// without one.
func (h *inheritance) handedKeySecret() []byte {
	if h == nil {
		return nil
	}
	return h.keySecret
}
