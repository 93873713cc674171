package gateway

import (
	_ "embed"

	"github.com/valyala/fasthttp"
)

// The admin page (docs/operations.md, "The admin page"): one HTML
// page, its script, style sheet and icon, embedded in the binary and
// served at / of the admin listener. The script reads the admin API with
// the operator's token (GET /admin/rules, GET /admin/refused,
// POST /admin/dry-run); the page itself holds no data, but without an
// admin token configured it is not served either (403, as the admin API:
// admin_api.go), since it could do nothing.

var (
	//go:embed adminpage/index.html
	adminIndexHTML []byte
	//go:embed adminpage/app.js
	adminAppJS []byte
	//go:embed adminpage/style.css
	adminStyleCSS []byte
	//go:embed adminpage/favicon.svg
	adminFaviconSVG []byte
)

// adminPageFile is one embedded file of the admin page.
type adminPageFile struct {
	contentType string
	body        []byte
}

// adminPageFiles are the admin page's files, by path. AdminHandler routes
// these paths here.
var adminPageFiles = map[string]adminPageFile{
	"/":            {"text/html; charset=utf-8", adminIndexHTML},
	"/app.js":      {"text/javascript; charset=utf-8", adminAppJS},
	"/style.css":   {"text/css; charset=utf-8", adminStyleCSS},
	"/favicon.svg": {"image/svg+xml", adminFaviconSVG},
}

// adminPageCSP is the page's Content-Security-Policy: its own origin only
// (no outside script, style, image or connection, no inline script or
// style), no <base>, no form posts anywhere, never framed (clickjacking
// the dry-run toggle).
const adminPageCSP = "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// adminPage serves the admin page's files (GET or HEAD), never cached: a
// page held by a cache would outlive the binary that embeds it.
func (s *Server) adminPage(ctx *fasthttp.RequestCtx) {
	f, ok := adminPageFiles[string(ctx.Path())]
	if !ok {
		ctx.Error("not found\n", fasthttp.StatusNotFound)
		return
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Error("use GET\n", fasthttp.StatusMethodNotAllowed) // resets the headers
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET, HEAD")
		return
	}
	if s.adminToken == nil {
		ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
		ctx.Error(adminOff+"\n", fasthttp.StatusForbidden)
		return
	}
	h := &ctx.Response.Header
	h.Set(fasthttp.HeaderContentSecurityPolicy, adminPageCSP)
	h.Set(fasthttp.HeaderCacheControl, "no-store")
	h.Set(fasthttp.HeaderXContentTypeOptions, "nosniff")
	h.Set(fasthttp.HeaderReferrerPolicy, "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	ctx.SetContentType(f.contentType)
	ctx.SetBody(f.body)
}
