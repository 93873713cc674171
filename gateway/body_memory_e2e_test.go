package gateway

import (
	"fmt"
	"io"
	"runtime"
	"testing"

	nodecfg "github.com/edge-gateway/edge/node"
)

// TestHalfSentBodyMemory measures what one half-sent body holds in the
// node, through the real server on the shipped policy (docs/deploying.md,
// "What half-sent bodies hold"; the tester's F8): fasthttp allocates a
// body's whole Content-Length (rounded up to a power of two) once its
// header is read, before a byte of the body arrives, and reads it into
// that buffer until body_timeout, so a client that announces
// max_body_bytes and sends one byte holds max_body_bytes, with the
// connection's read buffer (ReadBufferSize), its RequestCtx and its
// goroutine's stack. n connections each announce max_body_bytes and send
// 13 bytes of it; the heap and stacks they hold, less the node's before
// them, over n, is the figure docs/deploying.md gives, which this checks
// stays between max_body_bytes and max_body_bytes + perConnOverhead.
func TestHalfSentBodyMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory is counted in the heap")
	}
	const n = 64
	// perConnOverhead bounds what a half-sent body holds beside the body
	// itself: the 8 KiB read buffer, a RequestCtx (about 3 KiB), a
	// goroutine stack (8 KiB once grown), the connection's structures.
	const perConnOverhead = 32 << 10
	p := loadPolicy(t, "policies.hcl", append(append(untrustedLoopback, holdHeaders...),
		`body_timeout              = "30s"`, `body_timeout              = "10m"`)...)
	node := startNode(t, p, nodeOptions{})
	maxBody := nodecfg.Of(p).MaxBodyBytes
	head := fmt.Sprintf("POST /login HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"username\":", maxBody)
	// Warm the server (its pools, the upstream client) with one request.
	if st := probeFrom(t, "127.0.0.2", node.addr, "/api/warm"); st != 200 {
		t.Fatalf("warm-up: %d", st)
	}
	held := func() int64 {
		runtime.GC() // twice: the first moves the pools to their victim caches, the second frees them
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc + m.StackInuse)
	}
	before := held()
	for i := range n {
		c := dialFrom(t, fmt.Sprintf("127.0.1.%d", 1+i%200), node.addr)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
	}
	// The node has read every header once it holds every body's buffer;
	// the wait ends a broken test only.
	var per int64
	waitFor(t, func() bool { per = (held() - before) / n; return per >= int64(maxBody) }, answerGuard,
		fmt.Sprintf("%d half-sent bodies to hold max_body_bytes each", n))
	per = (held() - before) / n
	t.Logf("one half-sent body of max_body_bytes = %d holds %d bytes (%.1f KiB) in the node", maxBody, per, float64(per)/1024)
	if per > int64(maxBody)+perConnOverhead {
		t.Errorf("a half-sent body holds %d bytes, over max_body_bytes %d and %d of overhead: docs/deploying.md's bound is wrong", per, maxBody, perConnOverhead)
	}
}
