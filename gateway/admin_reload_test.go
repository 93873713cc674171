package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/rules/memstore"
)

// TestAdminReloadAnswers: POST /admin/reload answers the node's reload
// result, 200 when reloaded and 422 when refused, audits the call, refuses
// a body that is not {}, and answers 501 on a node without a reload path.
// The reload path itself (parse, tests, swap) is cmd/edge's and tested
// there.
func TestAdminReloadAnswers(t *testing.T) {
	p := loadPolicy(t, foundation)
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	next := ReloadResult{OK: true, Rules: 7, Warnings: []string{"listen: the node keeps listening"}}
	calls := 0
	var logs bytes.Buffer
	srv, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: st, AdminToken: "tok", Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Reload: func() ReloadResult { mu.Lock(); defer mu.Unlock(); calls++; return next }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	aln := listen(t)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeAdmin(ctx, aln) }()
	defer func() { cancel(); <-done }()
	url := "http://" + aln.Addr().String() + "/admin/reload"
	auth := []string{"Authorization", "Bearer tok", "X-Edge-Actor", "oncall"}

	r := do(t, "POST", url, "{}", auth...)
	var ans struct {
		Status      string   `json:"status"`
		Rules       int      `json:"rules"`
		Warnings    []string `json:"warnings"`
		Diagnostics []string `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || r.status != 200 || ans.Status != "reloaded" || ans.Rules != 7 || len(ans.Warnings) != 1 {
		t.Fatalf("reloaded: got %d %s (%v)", r.status, r.body, err)
	}
	if !strings.Contains(logs.String(), `"audit":"reload","actor":"oncall"`) || !strings.Contains(logs.String(), `"result":"reloaded"`) {
		t.Errorf("no audit record:\n%s", logs.String())
	}

	mu.Lock()
	next = ReloadResult{Rules: 5, Diagnostics: []string{"p.hcl:10,12-26: Invalid period; x"}}
	mu.Unlock()
	r = do(t, "POST", url, "", auth...) // an empty body is {}
	ans.Warnings = nil
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || r.status != 422 || ans.Status != "refused" || ans.Rules != 5 ||
		len(ans.Diagnostics) != 1 || ans.Warnings == nil {
		t.Fatalf("refused: got %d %s (%v), want 422 with the diagnostics and an empty warnings list", r.status, r.body, err)
	}

	if r := do(t, "POST", url, `{"force": true}`, auth...); r.status != 400 {
		t.Errorf("unknown field: got %d, want 400", r.status)
	}
	if r := do(t, "POST", url, "{}"); r.status != 401 {
		t.Errorf("no token: got %d, want 401", r.status)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Errorf("%d reloads, want 2 (a refused call reloads nothing)", calls)
	}

	bare, err := New(Options{Extensions: builtin.Extensions(), Policy: p, Store: st, AdminToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	bln := listen(t)
	bdone := make(chan struct{})
	go func() { defer close(bdone); _ = bare.ServeAdmin(ctx, bln) }()
	defer func() { cancel(); <-bdone }()
	if r := do(t, "POST", "http://"+bln.Addr().String()+"/admin/reload", "{}", auth...); r.status != 501 {
		t.Errorf("no reload path: got %d %s, want 501", r.status, r.body)
	}
}
