package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/edge-gateway/edge/rules/memstore"
)

// A real shared cache in front of the edge (docs/headers.md): Debian's
// nginx with proxy_cache, started by the test with its own configuration in
// a temporary directory, in front of the in-process edge, in front of a
// test origin. Client A's request fills the cache; client B, another
// client to the edge (nginx is a trusted proxy and passes each client's
// address in X-Forwarded-For), is served from the cache and must never
// receive A's RateLimit values. The controls show the cache really served
// B (X-Cache-Status: HIT, the origin's hit count unchanged) and that
// answers nginx does not store still carry each client's own values.

// cachePolicy counts every client per IP on every route.
const cachePolicy = `
edge {
  upstream         = "http://127.0.0.1:1"
  trusted_proxies  = ["127.0.0.1/32", "::1/128"]
  forwarded_header = "x-forwarded-for"
}
rule "cache-per-ip" {
  paths     = ["/*"]
  key       = ["ip"]
  algorithm = "gcra"
  limit     = 10
  period    = "1m"
}
`

// cacheOrigin answers every path with the cache headers its first segment
// names, and counts hits per path.
type cacheOrigin struct {
	mu   sync.Mutex
	hits map[string]int
}

// cacheRoutes: the origin's answers per first path segment. nginx stores
// the first three (Cache-Control max-age; Expires; nginx's own
// X-Accel-Expires with no Cache-Control at all), not the last.
var cacheRoutes = map[string][]string{
	"max-age": {"Cache-Control", "public, max-age=300"},
	"expires": {"Expires", "Thu, 01 Jan 2099 00:00:00 GMT"},
	"accel":   {"X-Accel-Expires", "300"},
	"private": {"Cache-Control", "private, max-age=300"},
}

func (o *cacheOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.hits[r.URL.Path]++
	o.mu.Unlock()
	seg, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	hs := cacheRoutes[seg]
	for i := 0; i+1 < len(hs); i += 2 {
		w.Header().Add(hs[i], hs[i+1])
	}
	_, _ = w.Write([]byte("the same for everyone\n"))
}

func (o *cacheOrigin) hitsOf(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[path]
}

// startNginx runs nginx as a caching reverse proxy to upstream (HOST:PORT)
// on a free loopback port and returns that address. It skips when nginx is
// not installed, unless EDGE_REQUIRE_STACKS=1 (CI), where it fails.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	conf := fmt.Sprintf(`%s
events { worker_connections 64; }
http {
%s  proxy_cache_path %s/cache levels=1 keys_zone=edge:1m;
  server {
    listen %s;
    location / {
      proxy_pass http://%s;
      proxy_http_version 1.1;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_cache edge;
      add_header X-Cache-Status $upstream_cache_status always;
    }
  }
}
`, nginxMain(dir), nginxHTTP(dir), dir, addr, upstream)
	runNginx(t, dir, conf, addr)
	return addr
}

func TestSharedCacheNeverServesAnotherClientsRateLimit(t *testing.T) {
	origin := &cacheOrigin{hits: map[string]int{}}
	osrv := &http.Server{Handler: origin}
	oln := listen(t)
	go func() { _ = osrv.Serve(oln) }()
	t.Cleanup(func() { osrv.Close() })
	st, err := memstore.New(memstore.Options{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	edge := startHeaderNode(t, cachePolicy, st, "http://"+oln.Addr().String())
	cache := startNginx(t, edge.addr)

	get := func(path, client string) reply {
		t.Helper()
		return do(t, "GET", "http://"+cache+path, "", "X-Forwarded-For", client)
	}
	remaining := func(r reply) int64 {
		t.Helper()
		l := limits(t, r.header.Get("RateLimit"))["cache-per-ip"]
		if l == nil {
			return -1
		}
		return l["r"]
	}
	const a, b = "198.51.100.1", "198.51.100.2"

	// The control: nginx does not store the private answer, so each client
	// gets its own values through it, and A's count shows in them.
	for i := range 3 {
		r := get("/private/x", a)
		if r.status != 200 || r.header.Get("X-Cache-Status") == "HIT" || remaining(r) != int64(9-i) {
			t.Fatalf("private answer %d to A: got %d, X-Cache-Status %q, RateLimit %q; want 200, not from the cache, r=%d",
				i, r.status, r.header.Get("X-Cache-Status"), r.header.Get("RateLimit"), 9-i)
		}
	}
	if r := get("/private/x", b); remaining(r) != 9 {
		t.Fatalf("private answer to B: RateLimit %q, want B's own r=9", r.header.Get("RateLimit"))
	}
	if got := origin.hitsOf("/private/x"); got != 4 {
		t.Fatalf("origin saw the private path %d times, want 4 (none from the cache)", got)
	}

	for _, seg := range []string{"max-age", "expires", "accel"} {
		t.Run(seg, func(t *testing.T) {
			path := "/" + seg + "/x"
			ra := get(path, a) // fills the cache
			if ra.status != 200 || ra.header.Get("X-Cache-Status") != "MISS" {
				t.Fatalf("A: got %d, X-Cache-Status %q, want 200 MISS", ra.status, ra.header.Get("X-Cache-Status"))
			}
			for _, c := range []string{b, a, b} {
				rb := get(path, c)
				if rb.header.Get("X-Cache-Status") != "HIT" {
					t.Fatalf("%s: X-Cache-Status %q, want HIT: the test needs the cache to serve it", c, rb.header.Get("X-Cache-Status"))
				}
				for _, h := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
					if v := rb.header.Get(h); v != "" {
						t.Errorf("%s served from the cache with %s: %q (A's answer had %q)", c, h, v, ra.header.Get(h))
					}
				}
			}
			if got := origin.hitsOf(path); got != 1 {
				t.Errorf("origin saw %s %d times, want 1: the others came from the cache", path, got)
			}
			if ra.header.Get("RateLimit") != "" {
				t.Errorf("A's answer, which the cache stored, carried RateLimit %q", ra.header.Get("RateLimit"))
			}
		})
	}

	// The edge still counted each client on the cached paths it saw: A's
	// next answer of its own says so.
	if r := get("/private/y", a); remaining(r) != 3 {
		t.Errorf("A after the cached paths: RateLimit %q, want r=3 (7 of its requests reached the edge)", r.header.Get("RateLimit"))
	}
}
