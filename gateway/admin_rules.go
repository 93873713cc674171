package gateway

import "github.com/valyala/fasthttp"

// adminRules is not built yet (issue 13).
func (s *Server) adminRules(ctx *fasthttp.RequestCtx) {
	adminError(ctx, fasthttp.StatusNotImplemented, "not built yet")
}
