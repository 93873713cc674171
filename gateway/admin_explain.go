package gateway

import "github.com/valyala/fasthttp"

// adminExplain is not built yet (issue 13).
func (s *Server) adminExplain(ctx *fasthttp.RequestCtx) {
	adminError(ctx, fasthttp.StatusNotImplemented, "not built yet")
}
