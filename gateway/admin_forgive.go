package gateway

import (
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/rules"
)

// forgiveRequest is POST /admin/forgive's body (docs/operations.md,
// "Forgive").
type forgiveRequest struct {
	// Rule names the rule whose counter to clear.
	Rule string `json:"rule"`
	// Key gives a value for each characteristic of the rule's key, by the
	// name the key writes it ("account", "ip", "header:X-Api-Key"), as the
	// operator knows it: the edge encodes and hashes it as a request's.
	Key map[string]string `json:"key"`
	// For, a Go duration up to rules.MaxExempt, also exempts the key from
	// the rule for that long; empty: clear only.
	For string `json:"for"`
	// Reason is required: it goes to the audit log with the actor.
	Reason string `json:"reason"`
}

// forgiveAnswer is POST /admin/forgive's answer.
type forgiveAnswer struct {
	Rule        string `json:"rule"`
	Cleared     bool   `json:"cleared"`
	ExemptUntil string `json:"exempt_until"` // RFC 3339, or empty without an exemption
}

// adminForgive clears one key's counter on a rule, and with "for" exempts
// it for a while (rules.Engine.Forgive): for the locked-out customer on
// the phone with support. Audited with the actor, the reason and the
// key's hash, never its values.
func (s *Server) adminForgive(ctx *fasthttp.RequestCtx) {
	var req forgiveRequest
	if !readAdminJSON(ctx, &req) {
		return
	}
	req.Reason = strings.TrimSpace(req.Reason)
	if req.Reason == "" {
		adminError(ctx, fasthttp.StatusBadRequest, `"reason" is required: say why, for the audit log`)
		return
	}
	var exempt time.Duration
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 || d > rules.MaxExempt {
			adminError(ctx, fasthttp.StatusBadRequest, `"for" must be a duration between 1s and 24h, such as "1h"`)
			return
		}
		exempt = d
	}
	p := s.state.Load().policy
	r := p.Rule(req.Rule)
	if r == nil {
		adminError(ctx, fasthttp.StatusBadRequest, "no rule named "+req.Rule+" in the running policy")
		return
	}
	f, err := s.engine.Forgive(ctx, s.requestTime(ctx), p, r, req.Key, exempt)
	switch {
	case errors.Is(err, rules.ErrNotForgivable):
		adminError(ctx, fasthttp.StatusBadRequest, "rule "+r.Name+": "+err.Error())
		return
	case err != nil && f.Key == (rules.Key{}):
		if _, kerr := s.engine.KeyFromText(p, r, req.Key); kerr != nil {
			adminError(ctx, fasthttp.StatusBadRequest, kerr.Error()) // the operator's values
			return
		}
		adminError(ctx, fasthttp.StatusServiceUnavailable, "the store did not answer, nothing cleared: "+err.Error())
		return
	case err != nil:
		adminError(ctx, fasthttp.StatusServiceUnavailable, "cleared, but the store did not take the exemption: "+err.Error())
		return
	}
	ans := forgiveAnswer{Rule: r.Name, Cleared: true}
	attrs := []slog.Attr{slog.String("rule", r.Name), slog.String("key", hex.EncodeToString(f.Key[9:]))}
	if !f.ExemptUntil.IsZero() {
		ans.ExemptUntil = f.ExemptUntil.UTC().Format(time.RFC3339)
		attrs = append(attrs, slog.String("for", exempt.String()), slog.String("exempt_until", ans.ExemptUntil))
	}
	s.audit(ctx, "forgive", req.Reason, attrs...)
	adminJSON(ctx, fasthttp.StatusOK, ans)
}
