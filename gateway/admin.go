package gateway

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/edge-gateway/edge/rules"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// AdminHandler serves the admin listener (docs/architecture.md, "The admin
// listener"): /healthz (the process
// is up), /readyz (the node can serve; JSON body), /metrics (Prometheus),
// the admin API under /admin/ (admin_api.go) and the admin page at /
// (admin_page.go). Without an admin token only the first three answer:
// the API and the page are 403, saying why.
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
//
// A store that refuses the node (Health.Refused: a wrong password, a
// missing ACL permission) is not an outage but a configuration error,
// which waiting does not mend: while it lasts, a node with rules that
// fail closed (on_store_error = "deny", enforcing: logins and OTP sends by
// default) answers them all 503, so /readyz answers 503 too, status
// "unready", strict or not, with the refusal and those rules named. A
// rollout with a mistyped secret then stops at its first node instead of
// going green.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	strict, ok := parseStrict(ctx.QueryArgs())
	if !ok {
		ctx.Error("strict must be 1, true, yes or on, or 0, false, no or off\n", fasthttp.StatusBadRequest)
		return
	}
	ctx.SetContentType("application/json")
	p := s.Policy()
	body := map[string]any{"status": "ok", "dry_run": s.engine.DryRunAt(s.requestTime(ctx)) || p.DryRun}
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
		if refused, reason := s.health.Refused(); refused {
			if names := failClosedRules(p); len(names) > 0 {
				body["status"] = "unready"
				body["reason"] = reason + "; rules that fail closed answer 503: " + listNames(names, 5)
				ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			} else if body["status"] == "ok" {
				body["status"] = "degraded"
				body["reason"] = reason
			}
		}
	}
	b, _ := json.Marshal(body)
	ctx.SetBody(append(b, '\n'))
}

// failClosedRules returns the names of p's rules that a store error
// refuses with 503: on_store_error = "deny", and enforcing by the policy
// (not dry_run, in a policy not all in dry-run). A runtime dry-run toggle
// does not count: it may be switched off at any moment.
func failClosedRules(p *rules.Policy) []string {
	if p.DryRun {
		return nil
	}
	var names []string
	for _, r := range p.Rules {
		if r.OnStoreError == rules.FailClosed && !r.DryRun && r.Action == rules.ActionLimit {
			names = append(names, r.Name)
		}
	}
	return names
}

// listNames joins the first n of names with commas, and says how many
// more there are.
func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + " and " + strconv.Itoa(len(names)-n) + " more"
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
