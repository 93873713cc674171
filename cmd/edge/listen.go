package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Listeners a node inherits (docs/deploying.md, "Graceful restarts and
// binary upgrades"). A node opens each of its listeners ("public",
// "admin", "decide", and "demo" with -demo) through openListener, which
// takes an inherited socket of that name when there is one and binds the
// address otherwise. Sockets are inherited two ways:
//
//   - from the node it upgrades: $EDGE_LISTEN_FDS names the descriptors the
//     old process passed ("public:3,admin:4"), the very sockets it
//     accepted on, so that connections queue in their backlog while the
//     processes hand over and none is refused;
//   - from systemd's socket activation (sd_listen_fds(3)): $LISTEN_PID is
//     this process, $LISTEN_FDS descriptors from 3, named by
//     $LISTEN_FDNAMES (a .socket unit's FileDescriptorName=public); a lone
//     unnamed socket is the public one.
//
// The variables are cleared once read, so that no later child mistakes
// them for its own.

// listenFDsEnv names the sockets a binary upgrade passes: NAME:FD,...
const listenFDsEnv = "EDGE_LISTEN_FDS"

// sdListenFDsStart is SD_LISTEN_FDS_START: systemd's first descriptor.
const sdListenFDsStart = 3

// listenerSet is the process's listeners by name: those inherited and not
// yet claimed, and those in use, which a binary upgrade passes on.
type listenerSet struct {
	once      sync.Once
	mu        sync.Mutex
	log       *slog.Logger
	source    string              // "upgrade" or "systemd": where inherited came from
	inherited map[string]*os.File // not yet claimed
	inUse     []namedListener     // in the order opened
	err       error               // the variables could not be read
}

type namedListener struct {
	name string
	ln   *net.TCPListener
}

// listeners is the process's one set: a process has one set of sockets.
var listeners = &listenerSet{}

// openListener opens the named listener ("public", "admin", "decide",
// "demo") on addr, or takes the socket of that name the process inherited.
// An inherited socket bound elsewhere than addr (the policy moved the
// listener before the upgrade) is closed and addr bound instead; one from
// systemd is used as is, with a warning (the socket unit owns the
// address).
func openListener(name, addr string) (net.Listener, error) {
	return listeners.open(name, addr)
}

// setLogger gives the set the node's logger, for the warnings above.
func (s *listenerSet) setLogger(log *slog.Logger) {
	s.mu.Lock()
	s.log = log
	s.mu.Unlock()
}

func (s *listenerSet) open(name, addr string) (net.Listener, error) {
	s.once.Do(s.inherit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	var tl *net.TCPListener
	if f := s.inherited[name]; f != nil {
		delete(s.inherited, name)
		ln, err := net.FileListener(f) // a duplicate, close-on-exec
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("inherited %s socket (from %s): %w", name, s.source, err)
		}
		var ok bool
		if tl, ok = ln.(*net.TCPListener); !ok {
			ln.Close()
			return nil, fmt.Errorf("inherited %s socket (from %s) is not a TCP listener: %s", name, s.source, ln.Addr())
		}
		if !addrMatches(tl.Addr(), addr) {
			if s.source == "systemd" {
				s.warn("listening on the socket systemd passed, not on the address the policy or flag names: the socket unit's ListenStream= decides", "listener", name, "socket", tl.Addr().String(), "configured", addr)
			} else {
				s.warn("the listener moved since the previous process: binding the new address (the old one closes with the previous process)", "listener", name, "old", tl.Addr().String(), "new", addr)
				tl.Close()
				tl = nil
			}
		}
	}
	if tl == nil {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		tl = ln.(*net.TCPListener)
	}
	for i := range s.inUse {
		if s.inUse[i].name == name {
			s.inUse[i].ln = tl
			return tl, nil
		}
	}
	s.inUse = append(s.inUse, namedListener{name, tl})
	return tl, nil
}

func (s *listenerSet) warn(msg string, args ...any) {
	if s.log != nil {
		s.log.Warn(msg, args...)
	}
}

// unclaimed closes the inherited sockets no listener took (a policy
// without a decide_listen any more) and names them.
func (s *listenerSet) unclaimed() []string {
	s.once.Do(s.inherit)
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name, f := range s.inherited {
		f.Close()
		names = append(names, name)
	}
	clear(s.inherited)
	return names
}

// fds returns the descriptor and the name of each listener in use, for a
// binary upgrade's new process. They stay this process's: valid while the
// listeners are open.
func (s *listenerSet) fds() (fds []uintptr, names []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, nl := range s.inUse {
		rc, err := nl.ln.SyscallConn()
		if err != nil {
			return nil, nil, fmt.Errorf("passing the %s socket: %w", nl.name, err)
		}
		var fd uintptr
		if err := rc.Control(func(d uintptr) { fd = d }); err != nil {
			return nil, nil, fmt.Errorf("passing the %s socket: %w", nl.name, err)
		}
		fds = append(fds, fd)
		names = append(names, nl.name)
	}
	return fds, names, nil
}

// inherit reads the variables once, at the first open.
func (s *listenerSet) inherit() {
	s.inherited = map[string]*os.File{}
	if v, ok := os.LookupEnv(listenFDsEnv); ok {
		os.Unsetenv(listenFDsEnv)
		s.source = "upgrade"
		s.err = s.parseEdgeFDs(v)
		return
	}
	pid, ok := os.LookupEnv("LISTEN_PID")
	if !ok {
		return
	}
	n, names := os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(k)
	}
	if pid != strconv.Itoa(os.Getpid()) {
		return // meant for another process (sd_listen_fds(3))
	}
	s.source = "systemd"
	s.err = s.parseSystemdFDs(n, names)
}

func (s *listenerSet) parseEdgeFDs(v string) error {
	for item := range strings.SplitSeq(v, ",") {
		name, fdText, ok := strings.Cut(item, ":")
		fd, err := strconv.Atoi(fdText)
		if !ok || name == "" || err != nil || fd < sdListenFDsStart {
			return fmt.Errorf("$%s: %q is not NAME:FD with FD at least %d", listenFDsEnv, item, sdListenFDsStart)
		}
		if s.inherited[name] != nil {
			return fmt.Errorf("$%s: %s named twice", listenFDsEnv, name)
		}
		s.inherited[name] = os.NewFile(uintptr(fd), name)
	}
	return nil
}

func (s *listenerSet) parseSystemdFDs(nText, names string) error {
	n, err := strconv.Atoi(nText)
	if err != nil || n < 0 || n > 64 {
		return fmt.Errorf("$LISTEN_FDS %q is not a small count of sockets", nText)
	}
	var list []string
	if names != "" {
		list = strings.Split(names, ":")
	}
	for i := range n {
		name := "unknown"
		if i < len(list) && list[i] != "" {
			name = list[i]
		}
		if name == "unknown" && n == 1 {
			name = "public"
		}
		if s.inherited[name] != nil {
			return errors.New("$LISTEN_FDNAMES names " + name + " twice: give each socket its own FileDescriptorName=")
		}
		s.inherited[name] = os.NewFile(uintptr(sdListenFDsStart+i), name)
	}
	return nil
}

// addrMatches reports whether a socket bound to got serves the address
// want (HOST:PORT, as the policy or a flag gives it): the same port (any,
// for port 0) and the same IP, the unspecified ones (0.0.0.0, ::, an
// empty host) all alike.
func addrMatches(got net.Addr, want string) bool {
	ta, ok := got.(*net.TCPAddr)
	if !ok {
		return false
	}
	host, port, err := net.SplitHostPort(want)
	if err != nil {
		return false
	}
	if port != "0" {
		p, err := net.LookupPort("tcp", port)
		if err != nil || p != ta.Port {
			return false
		}
	}
	if host == "" {
		return ta.IP.IsUnspecified()
	}
	ips := []net.IP{net.ParseIP(host)}
	if ips[0] == nil {
		if ips, err = net.LookupIP(host); err != nil {
			return false
		}
	}
	for _, ip := range ips {
		if ip.Equal(ta.IP) || (ip.IsUnspecified() && ta.IP.IsUnspecified()) {
			return true
		}
	}
	return false
}
