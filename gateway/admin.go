package gateway

import (
	"encoding/json"

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
		s.readyz(ctx)
	case "/metrics":
		s.metricsHandler()(ctx)
	default:
		ctx.Error("not found\n", fasthttp.StatusNotFound)
	}
}

// readyz answers 200 while the node can serve, even with its store down:
// a fleet sharing one sick Redis must not be pulled out of its load
// balancer all at once (DESIGN §7). The body says "degraded" and why;
// /readyz?strict=1 answers 503 when degraded.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	body := map[string]any{"status": "ok", "dry_run": s.engine.DryRun() || s.Policy().DryRun}
	if s.health != nil {
		if degraded, reason := s.health.Degraded(); degraded {
			body["status"] = "degraded"
			body["reason"] = reason
			if string(ctx.QueryArgs().Peek("strict")) == "1" {
				ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			}
		}
	}
	b, _ := json.Marshal(body)
	ctx.SetBody(append(b, '\n'))
}

func (s *Server) metricsHandler() fasthttp.RequestHandler {
	s.metricsOnce.Do(func() {
		s.metricsH = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	})
	return s.metricsH
}
