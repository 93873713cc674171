package gateway

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testredis"
	nodecfg "github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/nodestore"
)

// TestRedisResetIsFoundAndHeld: a real redis-server restarted without its
// data (issue 25, section 4: a phone with 2 of its 3 sends got 3 more, and
// the node logged only a key-format warning). A client has made 4 of its 5
// logins a minute; Redis restarts empty; the first call after it (an
// ordinary route's) finds an empty script cache (NOSCRIPT), which wakes
// the epoch check; the check finds the epoch gone, logs it at error level
// and counts it, and with reset_grace the sensitive login rule answers by
// its on_store_error (503: fail closed) rather than give the client 5
// more, while the ordinary route is served and counted as before.
func TestRedisResetIsFoundAndHeld(t *testing.T) {
	r := testredis.Start(t)
	pol := loadPolicy(t, foundation, "store \"memory\" {\n  max_keys = 100000\n}", fmt.Sprintf("store \"redis\" {\n  url         = %q\n  timeout     = \"1s\"\n  reset_grace = \"10m\"\n}", r.URL()))
	origin, _, nodes := startFleet(t, pol, 1)
	n := nodes[0]
	var logs bytes.Buffer
	w := nodestore.EpochWatch{Redis: n.rs, Store: n.fc, Grace: func() time.Duration { return nodecfg.Of(n.srv.Policy()).Store.ResetGrace }, Now: time.Now, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	ctx := t.Context()
	w.Check(ctx) // the node's first check, at start: adopts the epoch

	login := func() int { return do(t, "POST", "http://"+n.addr+"/login", "", "X-Forwarded-For", "192.0.2.7").status }
	api := func() int { return do(t, "GET", "http://"+n.addr+"/api/x", "", "X-Forwarded-For", "192.0.2.8").status }
	for i := range 4 {
		if st := login(); st != 401 {
			t.Fatalf("login %d within the limit: got %d, want the origin's 401", i+1, st)
		}
	}
	w.Check(ctx)
	if strings.Contains(logs.String(), "WITHOUT ITS DATA") {
		t.Fatalf("a reset logged before Redis restarted:\n%s", logs.String())
	}

	r.Restart() // empty: no persistence
	// The first call on the empty Redis is answered NOSCRIPT and run
	// again by EVAL: counted from zero, before any check can know.
	if st := api(); st != 200 {
		t.Errorf("the first request on the empty Redis: got %d, want 200", st)
	}
	select {
	case <-n.rs.EpochWake():
	default:
		t.Fatal("the NOSCRIPT of the first call on the empty Redis did not wake the epoch check")
	}
	w.Check(ctx)
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"REDIS CAME BACK WITHOUT ITS DATA`) || !strings.Contains(logs.String(), `"reset_grace":"10m0s"`) {
		t.Errorf("the reset was not logged at error level with its grace:\n%s", logs.String())
	}
	hits := origin.Hits()["/login"]
	for i := range 5 {
		if st := login(); st != 503 {
			t.Errorf("login %d within reset_grace: got %d, want on_store_error's 503 (fail closed)", i+1, st)
		}
	}
	if got := origin.Hits()["/login"] - hits; got != 0 {
		t.Errorf("%d logins reached the origin within reset_grace, want 0", got)
	}
	if st := api(); st != 200 {
		t.Errorf("an ordinary route within reset_grace: got %d, want 200 (counted in Redis)", st)
	}
	if got := gathered(t, n.reg, "edge_redis_resets_total"); got != 1 {
		t.Errorf("edge_redis_resets_total = %v, want 1", got)
	}
	if got := gathered(t, n.reg, "edge_store_reset_holds_total"); got != 5 {
		t.Errorf("edge_store_reset_holds_total = %v, want 5", got)
	}
	w.Check(ctx)
	if got := gathered(t, n.reg, "edge_redis_resets_total"); got != 1 {
		t.Errorf("a check after the fleet agrees again: edge_redis_resets_total = %v, want still 1", got)
	}
}
