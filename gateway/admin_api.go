package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/valyala/fasthttp"
)

// The admin API (docs/operations.md): JSON endpoints under /admin/ on the
// admin listener, for incident responders and their tools (edge dry-run,
// edge explain, edge reload, the admin page). Every request needs
// Authorization: Bearer $EDGE_ADMIN_TOKEN, compared in constant time.
// Without a token configured the whole admin API is off (403, saying so),
// reads included: the rules, the refused keys and explain tell an
// attacker on the admin listener's network what the limits are and how
// close a key is to them, so nothing answers without a token but what a
// probe and a scraper need (/healthz, /readyz, /metrics; admin.go).
// Every mutating call is logged as an audit record: the endpoint, the
// actor (X-Edge-Actor, or "admin"), the reason, and what changed.

// adminOff is the answer of the admin API and page on a node without an
// admin token.
const adminOff = "the admin API is off: this node has no admin token (set EDGE_ADMIN_TOKEN); without one its admin listener serves only /healthz, /readyz and /metrics"

// maxAdminBody caps an admin request's JSON body, in bytes.
const maxAdminBody = 64 << 10

// adminRoute is one admin endpoint.
type adminRoute struct {
	method   string
	mutating bool
	handle   func(s *Server, ctx *fasthttp.RequestCtx)
}

// adminRoutes are the admin API's endpoints, by path. Each handler lives
// in its own file (admin_*.go).
var adminRoutes = map[string]adminRoute{
	"/admin/rules":   {fasthttp.MethodGet, false, (*Server).adminRules},
	"/admin/dry-run": {fasthttp.MethodPost, true, (*Server).adminDryRun},
	"/admin/explain": {fasthttp.MethodPost, false, (*Server).adminExplain},
	"/admin/reload":  {fasthttp.MethodPost, true, (*Server).adminReload},
	"/admin/forgive": {fasthttp.MethodPost, true, (*Server).adminForgive},
	"/admin/refused": {fasthttp.MethodGet, false, (*Server).adminRefused},
}

// adminAPI serves /admin/*: the route, the method, the token.
func (s *Server) adminAPI(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	route, ok := adminRoutes[string(ctx.Path())]
	if !ok {
		adminError(ctx, fasthttp.StatusNotFound, "no such admin endpoint")
		return
	}
	if string(ctx.Method()) != route.method {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, route.method)
		adminError(ctx, fasthttp.StatusMethodNotAllowed, "use "+route.method)
		return
	}
	switch {
	case s.adminToken != nil && !s.tokenOK(ctx):
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="edge admin"`)
		adminError(ctx, fasthttp.StatusUnauthorized, "missing or wrong admin token (Authorization: Bearer $EDGE_ADMIN_TOKEN)")
		return
	case s.adminToken == nil:
		adminError(ctx, fasthttp.StatusForbidden, adminOff)
		return
	}
	route.handle(s, ctx)
}

// tokenOK compares the request's bearer token with the node's in constant
// time (both hashed first, so neither length nor content leaks).
func (s *Server) tokenOK(ctx *fasthttp.RequestCtx) bool {
	got, ok := strings.CutPrefix(string(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)), "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], s.adminToken) == 1
}

// adminJSON writes v as the JSON answer with status.
func adminJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		adminError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

// adminError writes {"error": msg} with status.
func adminError(ctx *fasthttp.RequestCtx, status int, msg string) {
	adminJSON(ctx, status, map[string]string{"error": msg})
}

// readAdminJSON decodes the request's JSON body into v, refusing unknown
// fields and bodies over maxAdminBody; false after answering 400.
func readAdminJSON(ctx *fasthttp.RequestCtx, v any) bool {
	body := ctx.PostBody()
	if len(body) > maxAdminBody {
		adminError(ctx, fasthttp.StatusRequestEntityTooLarge, "body over 64 KiB")
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		adminError(ctx, fasthttp.StatusBadRequest, "body: "+err.Error())
		return false
	}
	return true
}

// actor names who made an admin call, for the audit log: the X-Edge-Actor
// header (a person's name, a ticket), or "admin".
func actor(ctx *fasthttp.RequestCtx) string {
	if a := strings.TrimSpace(string(ctx.Request.Header.Peek("X-Edge-Actor"))); a != "" && len(a) <= 128 {
		return a
	}
	return "admin"
}

// audit logs a mutating admin call: what, by whom, why, and its details.
func (s *Server) audit(ctx *fasthttp.RequestCtx, action, reason string, attrs ...slog.Attr) {
	s.log.LogAttrs(ctx, slog.LevelWarn, "admin "+action,
		append([]slog.Attr{slog.String("audit", action), slog.String("actor", actor(ctx)), slog.String("reason", reason)}, attrs...)...)
}
