package gateway

import "github.com/valyala/fasthttp"

// adminDryRun is not built yet (issue 13).
func (s *Server) adminDryRun(ctx *fasthttp.RequestCtx) {
	adminError(ctx, fasthttp.StatusNotImplemented, "not built yet")
}
