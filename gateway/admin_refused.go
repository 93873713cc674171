package gateway

import "github.com/valyala/fasthttp"

// adminRefused is not built yet (issue 13).
func (s *Server) adminRefused(ctx *fasthttp.RequestCtx) {
	adminError(ctx, fasthttp.StatusNotImplemented, "not built yet")
}
