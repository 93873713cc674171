package gateway

import (
	"log/slog"

	"github.com/valyala/fasthttp"
)

// ReloadResult is the outcome of one reload of the node's policy file
// (docs/operations.md, "Reload"), as the reload path that cmd/edge gives in
// Options.Reload reports it.
type ReloadResult struct {
	// OK is true when the new policy replaced the running one.
	OK bool
	// Rules is the number of rules of the policy now running: the new
	// one's when OK, the old one's otherwise.
	Rules int
	// Warnings name, one per line, each setting of the new file the
	// running node cannot apply ("listen: ..."), and the policy's warning
	// diagnostics.
	Warnings []string
	// Diagnostics say why a refused reload was refused, one per line,
	// "FILE:LINE,COL-COL: Summary; Detail" when a position is known (hcl's
	// Diagnostic.Error form); empty when OK.
	Diagnostics []string
}

// reloadAnswer is POST /admin/reload's JSON answer: 200 {"status":
// "reloaded", "rules": n, "warnings": [...]}, or 422 {"status": "refused",
// "diagnostics": [...]}.
type reloadAnswer struct {
	Status      string   `json:"status"`
	Rules       int      `json:"rules"`
	Warnings    []string `json:"warnings"`
	Diagnostics []string `json:"diagnostics,omitempty"`
}

// adminReload is POST /admin/reload with an empty body or {}: it runs the
// node's reload path (parse, validate, the file's test blocks, then an
// atomic swap) and answers its result, 422 when the running policy stays.
// Audited: the actor, and the result.
func (s *Server) adminReload(ctx *fasthttp.RequestCtx) {
	if len(ctx.PostBody()) > 0 {
		var req struct{}
		if !readAdminJSON(ctx, &req) {
			return
		}
	}
	if s.reload == nil {
		adminError(ctx, fasthttp.StatusNotImplemented, "this node has no policy file to reload")
		return
	}
	res := s.reload()
	ans := reloadAnswer{Status: "reloaded", Rules: res.Rules, Warnings: res.Warnings, Diagnostics: res.Diagnostics}
	if ans.Warnings == nil {
		ans.Warnings = []string{}
	}
	status := fasthttp.StatusOK
	if !res.OK {
		ans.Status, status = "refused", fasthttp.StatusUnprocessableEntity
	}
	s.audit(ctx, "reload", "", slog.String("result", ans.Status), slog.Int("rules", res.Rules),
		slog.Int("warnings", len(res.Warnings)), slog.Int("diagnostics", len(res.Diagnostics)))
	adminJSON(ctx, status, ans)
}
