package testredis

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MasterName is the name the sentinel of StartSentinel monitors its
// primary under.
const MasterName = "edgemaster"

// Sentinel is a primary, a replica of it and one redis-sentinel
// monitoring them (quorum 1), all on loopback, for failover tests.
type Sentinel struct {
	t                testing.TB
	files            TLSFiles // zero: plain
	Primary, Replica *Server
	// Monitor is the sentinel process; Do on it sends sentinel commands.
	Monitor *Server
}

// SentinelOptions configure StartSentinel.
type SentinelOptions struct {
	// DownAfter is the sentinel's down-after-milliseconds (500ms when 0):
	// how long the primary must not answer before it fails over.
	DownAfter time.Duration
	// Password, when set, is the sentinel's own requirepass.
	Password string
	// PrimaryArgs are more redis-server arguments for the primary only,
	// such as "--min-replicas-to-write", "1".
	PrimaryArgs []string
	// TLS serves the primary, the replica and the sentinel over TLS only,
	// with certificates of one throwaway CA; replication and the
	// sentinel's links are TLS too (tls-replication yes). URL is then
	// "rediss+sentinel://…" and TLS() names the files.
	TLS bool
}

// StartSentinel starts a primary, a replica (--replicaof the primary) and a
// sentinel with a generated config in the test's temporary directory, and
// waits until the replica has synced and the sentinel knows both. Each is
// stopped when the test ends.
func StartSentinel(t testing.TB, opts SentinelOptions) *Sentinel {
	t.Helper()
	requireRedis(t) // a sentinel runs as redis-server --sentinel
	if opts.DownAfter == 0 {
		opts.DownAfter = 500 * time.Millisecond
	}
	s := &Sentinel{t: t}
	var ca *CA
	if opts.TLS {
		ca = NewCA(t, "edge sentinel test CA")
		s.files = clientFiles(ca)
	}
	// No diskless-sync delay (5s by default, waiting for more replicas).
	s.Primary = s.startData(ca, append([]string{"--repl-diskless-sync-delay", "0"}, opts.PrimaryArgs...))
	s.Replica = s.startData(ca, []string{"--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", strconv.Itoa(s.Primary.Port)})
	waitUntil(t, func() bool {
		info, err := s.Replica.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, "the replica to sync")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t, ln)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	listen := fmt.Sprintf("port %d", port)
	if ca != nil {
		cert, key := ca.Issue("sentinel", false)
		listen = fmt.Sprintf("port 0\ntls-port %d\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\ntls-auth-clients no\ntls-replication yes", port, cert, key, ca.File)
	}
	cfg := fmt.Sprintf(`%s
bind 127.0.0.1
dir %s
sentinel monitor %s 127.0.0.1 %d 1
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s 1
`, listen, dir, MasterName, s.Primary.Port, MasterName, opts.DownAfter.Milliseconds(), MasterName, MasterName)
	if opts.Password != "" {
		cfg += "requirepass " + opts.Password + "\n"
	}
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Monitor = &Server{t: t, Port: port, dir: dir, binary: "redis-server", extra: []string{conf, "--sentinel"}}
	if ca != nil {
		s.Monitor.tls = clientConfig(t, s.files)
	}
	if opts.Password != "" {
		s.Monitor.auth = opts.Password
	}
	s.Monitor.start()
	t.Cleanup(s.Monitor.Kill)
	waitUntil(t, s.replicaPromotable, "the sentinel to know the replica well enough to promote it")
	return s
}

// replicaPromotable reports whether the sentinel would promote the
// replica: it is connected and up ("flags" exactly "slave"), its link to
// the master is ok, and the sentinel has had an INFO reply from it (until
// then "info-refresh" counts from the epoch, and a failover finds no good
// replica).
func (s *Sentinel) replicaPromotable() bool {
	out, err := s.Monitor.Do("SENTINEL", "REPLICAS", MasterName)
	if err != nil {
		return false
	}
	f := strings.Split(out, "\n")
	fields := map[string]string{}
	for i := 0; i+1 < len(f); i += 2 {
		fields[f[i]] = f[i+1]
	}
	refresh, err := strconv.ParseInt(fields["info-refresh"], 10, 64)
	return fields["port"] == strconv.Itoa(s.Replica.Port) && fields["flags"] == "slave" &&
		fields["master-link-status"] == "ok" && err == nil && refresh < 60_000
}

// startData starts a primary or a replica: plain, or TLS only with a
// certificate ca issues (and TLS replication).
func (s *Sentinel) startData(ca *CA, extra []string) *Server {
	s.t.Helper()
	if ca == nil {
		return startWith(s.t, extra...)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	srv := &Server{t: s.t, Port: freePort(s.t, ln), dir: s.t.TempDir()}
	srv.extra = append(append(tlsArgs(ca, srv.Port, "no"), "--tls-replication", "yes"), extra...)
	srv.files = s.files
	srv.tls = clientConfig(s.t, s.files)
	srv.start()
	s.t.Cleanup(srv.Kill)
	return srv
}

// startWith is Start with more redis-server arguments.
func startWith(t testing.TB, extra ...string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, Port: freePort(t, ln), dir: t.TempDir(), extra: extra}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// URL is "redis+sentinel://MASTER@127.0.0.1:PORT/0", the sentinel's
// ("rediss+sentinel://…" over TLS).
func (s *Sentinel) URL() string {
	scheme := "redis+sentinel://"
	if s.Monitor.tls != nil {
		scheme = "rediss+sentinel://"
	}
	return scheme + MasterName + "@" + s.Monitor.Addr() + "/0"
}

// TLS returns the files a client needs over TLS (zero for a plain setup).
func (s *Sentinel) TLS() TLSFiles { return s.files }

// Kill stops the primary and the replica (the replica first, so that the
// sentinel has no one to promote): the store is down.
func (s *Sentinel) Kill() {
	s.Replica.Kill()
	s.Primary.Kill()
}

// Restart starts the primary and the replica again, empty, on their
// ports, and waits until the replica has synced.
func (s *Sentinel) Restart() {
	s.t.Helper()
	s.Primary.Restart()
	s.Replica.Restart()
	waitUntil(s.t, func() bool {
		info, err := s.Replica.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, "the replica to sync again")
	waitUntil(s.t, s.replicaPromotable, "the sentinel to see the replica again")
}

// MasterPort returns the port the sentinel names as the master's now.
func (s *Sentinel) MasterPort() (int, error) {
	out, err := s.Monitor.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName)
	if err != nil {
		return 0, err
	}
	parts := strings.Split(out, "\n")
	if len(parts) != 2 {
		return 0, fmt.Errorf("get-master-addr-by-name: %q", out)
	}
	return strconv.Atoi(parts[1])
}

// Failover asks the sentinel to fail over now (SENTINEL FAILOVER) and waits
// until it names the replica as the master and the replica says it is
// one. It returns the new master.
func (s *Sentinel) Failover() *Server {
	s.t.Helper()
	if _, err := s.Monitor.Do("SENTINEL", "FAILOVER", MasterName); err != nil {
		s.t.Fatal(err)
	}
	return s.WaitMaster(s.Replica)
}

// WaitMaster waits until the sentinel names want as the master and want's
// ROLE is master, and returns it.
func (s *Sentinel) WaitMaster(want *Server) *Server {
	s.t.Helper()
	waitUntil(s.t, func() bool {
		p, err := s.MasterPort()
		if err != nil || p != want.Port {
			return false
		}
		role, err := want.Do("ROLE")
		return err == nil && strings.HasPrefix(role, "master")
	}, "the sentinel to promote the replica")
	return want
}

// Synced reports whether the replica has every write the primary has
// acknowledged (their replication offsets agree).
func (s *Sentinel) Synced() bool {
	off := func(srv *Server, field string) string {
		info, err := srv.Do("INFO", "replication")
		if err != nil {
			return "?" + field
		}
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				return v
			}
		}
		return "?" + field
	}
	return off(s.Primary, "master_repl_offset") == off(s.Replica, "master_repl_offset")
}

// waitUntil polls cond every 10ms until it holds, failing t after 30s (a
// hang guard: nothing here is timed).
func waitUntil(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling for an event, not timing it
	}
}

// AppClients returns the client connections srv holds other than the
// sentinels' (named "sentinel-…"), its replicas' and the one asking: the
// connections of the stores under test.
func AppClients(t testing.TB, srv *Server) int {
	t.Helper()
	out, err := srv.Do("CLIENT", "LIST")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(out, "\n") {
		f := map[string]string{}
		for kv := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["id"] == "" || strings.HasPrefix(f["name"], "sentinel-") || strings.ContainsAny(f["flags"], "SM") || f["cmd"] == "client|list" {
			continue
		}
		n++
	}
	return n
}
