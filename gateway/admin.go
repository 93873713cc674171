package gateway

import (
	"encoding/json"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// AdminHandler serves the admin listener (docs/architecture.md, "The admin
// listener"): /healthz (the process
// is up), /readyz (the node can serve; JSON body), /metrics (Prometheus),
// the admin API under /admin/ (admin_api.go) and the admin page at /
// (admin_page.go).
func (s *Server) AdminHandler(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/healthz":
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("ok\n")
	case "/readyz":
		s.readyz(ctx)
	case "/metrics":
		s.metricsHandler()(ctx)
	case "/", "/app.js", "/style.css", "/favicon.svg":
		s.adminPage(ctx)
	default:
		if strings.HasPrefix(string(ctx.Path()), "/admin/") {
			s.adminAPI(ctx)
			return
		}
		ctx.Error("not found\n", fasthttp.StatusNotFound)
	}
}

// readyz answers 200 while the node can serve, even with its store down:
// a fleet sharing one sick Redis must not be pulled out of its load
// balancer all at once (docs/architecture.md, "The admin listener").
// The body says "degraded" and why;
// /readyz?strict=1 answers 503 when degraded. strict takes 1, true, yes or
// on (or no value: ?strict) and 0, false, no or off, in any case; any other
// value is a 400, so that a probe written with a spelling the node does
// not know fails loudly instead of never failing.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	strict, ok := parseStrict(ctx.QueryArgs())
	if !ok {
		ctx.Error("strict must be 1, true, yes or on, or 0, false, no or off\n", fasthttp.StatusBadRequest)
		return
	}
	ctx.SetContentType("application/json")
	body := map[string]any{"status": "ok", "dry_run": s.engine.DryRunAt(s.requestTime(ctx)) || s.Policy().DryRun}
	// The origin's passive health is reported, never a reason for strict
	// readiness to fail: every node of a fleet shares the origin, and a
	// load balancer would pull them all at once (upstream_health.go).
	body["upstream"] = s.upstreamStatus()
	if s.health != nil {
		if degraded, reason := s.health.Degraded(); degraded {
			body["status"] = "degraded"
			body["reason"] = reason
			if strict {
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

// parseStrict reads readyz's strict argument: whether it asks for strict
// readiness, and whether its value is one the node knows. The name is
// matched in any case (?STRICT=1 too).
func parseStrict(args *fasthttp.Args) (strict, ok bool) {
	ok = true
	for k, v := range args.All() {
		if !strings.EqualFold(string(k), "strict") {
			continue
		}
		switch strings.ToLower(string(v)) {
		case "", "1", "true", "yes", "on":
			strict = true
		case "0", "false", "no", "off":
		default:
			ok = false
		}
	}
	return strict, ok
}
