package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/internal/testredis"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// Redis as managed services run it (docs/deploying.md, "Redis over TLS,
// ACLs and Sentinel"): the fleet and outage tests of redis_e2e_test.go run
// over each transport below, unchanged.

// redisDeployment is a Redis the nodes of a test reach by URL (and TLS
// files): one redis-server, one over TLS, or a primary and a replica
// behind a sentinel. Kill stops it (every data node), Restart starts it
// again empty.
type redisDeployment interface {
	URL() string
	TLS() testredis.TLSFiles
	Kill()
	Restart()
}

var redisTransports = []struct {
	name  string
	start func(testing.TB) redisDeployment
}{
	{"plain", func(t testing.TB) redisDeployment { return testredis.Start(t) }},
	{"tls", func(t testing.TB) redisDeployment { return testredis.StartTLS(t, testredis.TLSOptions{}) }},
	{"sentinel", func(t testing.TB) redisDeployment { return testredis.StartSentinel(t, testredis.SentinelOptions{}) }},
	{"tls+sentinel", func(t testing.TB) redisDeployment {
		return testredis.StartSentinel(t, testredis.SentinelOptions{TLS: true})
	}},
}

// tlsAttrs are the store block's TLS attributes for files (at most one;
// none for a plain server), each line ending in a newline.
func tlsAttrs(files []testredis.TLSFiles) string {
	var b strings.Builder
	for _, f := range files {
		for _, a := range [][2]string{{"ca_file", f.CAFile}, {"cert_file", f.CertFile}, {"key_file", f.KeyFile}, {"server_name", f.ServerName}} {
			if a[1] != "" {
				fmt.Fprintf(&b, "  %s = %q\n", a[0], a[1])
			}
		}
	}
	return b.String()
}

// storeOptions are the Redis store's options for a policy's store block,
// as cmd/edge's openStore makes them (no password_env here).
func storeOptions(sc nodecfg.StoreConfig) redisstore.Options {
	return redisstore.Options{
		URL: sc.URL, Timeout: sc.Timeout, DialTimeout: sc.DialTimeout,
		TLS: redisstore.TLS{CAFile: sc.CAFile, CertFile: sc.CertFile, KeyFile: sc.KeyFile, ServerName: sc.ServerName},
	}
}
