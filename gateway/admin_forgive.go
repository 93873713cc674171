package gateway

import "github.com/valyala/fasthttp"

// adminForgive is not built yet (issue 13).
func (s *Server) adminForgive(ctx *fasthttp.RequestCtx) {
	adminError(ctx, fasthttp.StatusNotImplemented, "not built yet")
}
