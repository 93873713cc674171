package gateway

import "github.com/valyala/fasthttp"

// adminReload is not built yet (issue 13).
func (s *Server) adminReload(ctx *fasthttp.RequestCtx) {
	adminError(ctx, fasthttp.StatusNotImplemented, "not built yet")
}
