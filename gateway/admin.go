package gateway

import (
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// AdminHandler serves the admin listener (DESIGN §8): /healthz (the process
// is up), /readyz (the node can serve; JSON body) and /metrics (Prometheus).
func (s *Server) AdminHandler(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/healthz":
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("ok\n")
	case "/readyz":
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"status":"ok"}` + "\n")
	case "/metrics":
		s.metricsHandler()(ctx)
	default:
		ctx.Error("not found\n", fasthttp.StatusNotFound)
	}
}

func (s *Server) metricsHandler() fasthttp.RequestHandler {
	s.metricsOnce.Do(func() {
		s.metricsH = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	})
	return s.metricsH
}
